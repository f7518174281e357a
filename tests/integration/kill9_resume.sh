# kill -9 in the middle of a generation: a second nightshiftd (another
# worker id) takes the job over once the lease expires, resumes it from the
# checkpoint instead of starting over, and the greedy job's final text equals
# an uninterrupted run of the same job. The database stays consistent.
# Run for a llama model, a kimi-linear one (recurrent KDA state) and a kimi-k3 one.
# The jobs have two choices and logprobs: each choice resumes from its own
# checkpointed tokens and records, and the resumed job's choices and logprobs
# equal the uninterrupted run's, value for value.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_kill9.sh"

kill_and_resume llama --n-embd 256 --n-layer 8 --n-ff 768 --n-ctx 4096
# kimi-linear: the KDA layers' recurrent state is rebuilt by replaying the checkpoint from position 0.
kill_and_resume kimi-linear --arch kimi-linear --n-embd 256 --n-layer 6 --n-head 4 --n-ff 512 --n-expert 8 \
  --n-expert-used 2 --mla-every 3 --kda-head-dim 64 --kl-n-ff-expert 256 --n-ctx 4096 --type Q8_0 \
  --tensor-type _exps=MXFP4
# kimi-k3: KDA state plus the cross-layer attention residuals and latent MXFP4 experts.
kill_and_resume kimi-k3 --arch kimi-k3 --n-embd 256 --n-layer 6 --n-head 4 --n-ff 512 --n-expert 8 \
  --n-expert-used 2 --mla-every 3 --kda-head-dim 64 --kl-n-ff-expert 256 --attn-res-block 2 --expert-latent 128 \
  --n-ctx 4096 --type Q8_0 --tensor-type _exps=MXFP4
echo "ok"
