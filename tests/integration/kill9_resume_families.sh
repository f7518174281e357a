# kill -9 resume (lib_kill9.sh, as kill9_resume.sh) on the 2026 MoE families:
# minimax-m2 (full-width Q/K norms, sigmoid routing with the selection bias)
# and bailingmoe2 (fused QKV, group-limited routing, a shared expert, a dense
# lead layer and a NextN block that is never read) and deepseek4 (hyper-
# connections, compressed blocks of 4 and 128 with the indexer's top-k, hash
# routing; the prompt and generation cross blocks of 4, the window and the
# top-k). A job with two choices and
# logprobs, killed mid-generation, resumes on another daemon to the bytes of
# an uninterrupted run. deepseek32 and glm-dsa (MLA with the lightning
# indexer, top-16 of the 400 tokens, glm-dsa with shared indexer layers): the
# resumed job re-reads its checkpointed positions' indexer keys and choices.
# bailingmoe3 (KDA layers and rotated MLA with a per-head gate, a shared
# expert, a NextN block): the resumed job rebuilds the KDA states by replay.
# minimax-m3 (MiniMax sparse attention, top-4 blocks of 4): the resumed job
# re-reads its checkpointed positions' indexer keys from the K cache rows.
# Their own script: each case takes seconds under load.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_kill9.sh"

kill_and_resume minimax-m2 --arch minimax-m2 --n-embd 256 --n-layer 8 --n-head 4 --n-head-kv 2 --mm-head-dim 64 \
  --n-ff 256 --n-expert 16 --n-expert-used 4 --rope-base 5000000 --n-ctx 4096 --type Q8_0 \
  --tensor-type 'ffn_(gate|up)_exps=Q4_K' --tensor-type ffn_down_exps=Q6_K
kill_and_resume minimax-m3 --arch minimax-m3 --n-embd 256 --n-layer 4 --n-head 4 --n-head-kv 2 --mm3-head-dim 64 \
  --n-ff 256 --n-expert 16 --n-expert-used 4 --msa-head-dim 64 --msa-block-size 4 --msa-top-k 4 --rope-base 5000000 \
  --n-ctx 4096 --type Q8_0 --tensor-type 'ffn_(gate|up)_exps=Q4_K' --tensor-type ffn_down_exps=Q6_K
kill_and_resume bailingmoe2 --arch bailingmoe2 --n-embd 256 --n-layer 6 --n-head 4 --n-head-kv 2 --n-ff 512 \
  --n-expert 16 --n-expert-used 4 --ling-n-ff-expert 256 --ling-n-expert-group 4 --ling-n-expert-group-used 2 \
  --rope-base 600000 --n-ctx 4096 --type Q8_0 --tensor-type 'ffn_(gate|up)_exps=Q4_K' --tensor-type ffn_down_exps=Q6_K
dsa=(--n-embd 256 --n-layer 4 --n-head 4 --n-ff 512 --n-expert 16 --n-expert-used 4 --q-lora-rank 128
  --kv-lora-rank 64 --qk-rope-dim 16 --qk-nope-dim 32 --v-head-dim 32 --n-ff-expert 256 --dsa-heads 8
  --dsa-head-dim 64 --dsa-top-k 16 --n-ctx 4096 --type Q8_0 --tensor-type 'ffn_(gate|up)_exps=Q4_K'
  --tensor-type ffn_down_exps=Q6_K)
kill_and_resume deepseek32 --arch deepseek32 "${dsa[@]}"
kill_and_resume glm-dsa --arch glm-dsa "${dsa[@]}" --dsa-types 1,0,1,0
kill_and_resume deepseek4 --arch deepseek4 --n-embd 256 --n-layer 4 --n-head 4 --n-ff 256 --n-expert 16 \
  --n-expert-used 4 --dsv4-ratios 0,4,128,4 --dsv4-window 8 --dsv4-top-k 4 --n-ctx 4096 --type Q8_0 \
  --tensor-type 'ffn_(gate|up)_exps=Q4_K' --tensor-type ffn_down_exps=Q6_K
kill_and_resume bailingmoe3 --arch bailingmoe3 --n-embd 256 --n-layer 6 --n-head 4 --n-ff 512 --n-expert 16 \
  --n-expert-used 4 --ling3-group 3 --ling3-kda-head-dim 32 --ling3-n-ff-expert 256 --ling3-n-ff-shexp 256 \
  --ling3-swiglu-limit 4 --rope-base 600000 --n-ctx 4096 --type Q8_0 --tensor-type 'ffn_(gate|up)_exps=Q4_K' \
  --tensor-type ffn_down_exps=Q6_K
echo "ok"
