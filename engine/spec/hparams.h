// Hyperparameters of a model, read from its GGUF metadata (`<arch>.*` keys).
// One struct for every architecture; fields an architecture lacks keep their
// defaults. Validated on load: a value that would make the forward pass
// divide by zero or index out of range is rejected with the key's name.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace ns::gguf {
class GgufFile;
}

namespace ns {

// Adjacent pairs (llama, deepseek2), split halves (neox: qwen, glm4moe), or split halves
// with interleaved position sections (imrope: qwen35moe; text positions rotate
// every section but the fourth, which stays at position 0).
enum class RopeType { norm, neox, imrope };
enum class RopeScaling { none, linear, yarn };
// How router logits become expert probabilities (`expert_gating_func`: 1 softmax, 2 sigmoid;
// softmax_weight, the reference's 3: experts chosen on the logits, softmax over the chosen, gpt-oss;
// sqrt_softplus, its 4: sqrt(softplus(logit)), deepseek4).
enum class ExpertGating { softmax, sigmoid, softmax_weight, sqrt_softplus };
// How rope.scaling.yarn_log_multiplier enters YaRN's magnitude (engine/layers/yarn_rope):
// plain, as the reference reads it for most architectures; mscale_all_dim, as it
// reads deepseek2's (the stored 0.1 * mscale_all_dim, which cancels the rotation's
// factor and is applied to the attention scale instead).
enum class YarnMscale { plain, mscale_all_dim };

struct Hparams;

// What an architecture decides that its file's keys leave open: its rope
// form, the defaults the reference's loader assumes for it when a key is
// absent, and a reader for keys only it has. Each architecture file
// (engine/arch) fills one and its registry line names it; Hparams::from_gguf
// reads it and never the architecture's name. The defaults are an
// architecture without quirks (llama).
struct ArchTraits {
  RopeType rope_type = RopeType::norm;
  YarnMscale yarn_mscale = YarnMscale::plain;
  ExpertGating default_gating = ExpertGating::softmax;  // expert_gating_func absent (0, "none")
  // expert_feed_forward_length absent: each expert is feed_forward_length / expert_used_count
  // wide (the reference's Qwen MoE and GLM-4.5 loaders), not feed_forward_length.
  bool split_n_ff = false;
  // attention.sliding_window_pattern absent while attention.sliding_window is set: the
  // period the reference's loader assumes (0: no layer slides).
  int64_t default_swa_period = 0;
  // Keys only this architecture has (e.g. its layer pattern), read after the shared ones;
  // `prefix` is "<general.architecture>.". Throws ns::Error(bad_model) naming the key.
  void (*read_keys)(const gguf::GgufFile& f, const std::string& prefix, Hparams& h) = nullptr;
};

struct Hparams {
  std::string arch;  // general.architecture
  std::string name;  // general.name
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;  // context_length
  int64_t n_embd = 0;       // embedding_length
  // The layers that run: block_count minus the trailing multi-token-prediction
  // blocks (nextn_predict_layers: glm4moe, qwen3next, qwen35moe), which the
  // reference's graph also leaves out.
  int64_t n_layer = 0;
  int64_t n_layer_nextn = 0;  // nextn_predict_layers: blocks n_layer.. are NextN (MTP) blocks, never loaded
  int64_t n_head = 0;         // attention.head_count
  int64_t n_head_kv = 0;      // attention.head_count_kv (the largest, when the file gives one per layer)
  // attention.head_count_kv as a per-layer array (hybrid models: 0 marks a
  // recurrent layer, e.g. kimi-linear's KDA layers; one per block, NextN blocks
  // included); empty when it is one number.
  std::vector<int64_t> n_head_kv_layers;
  int64_t head_count_kv(int64_t il) const {
    return n_head_kv_layers.empty() ? n_head_kv : n_head_kv_layers[static_cast<size_t>(il)];
  }
  int64_t head_dim = 0;                 // attention.key_length or n_embd / n_head
  int64_t head_dim_v = 0;               // attention.value_length or head_dim
  int64_t n_ff = 0;                     // feed_forward_length (dense layers)
  int64_t n_expert = 0;                 // expert_count (0 = dense)
  int64_t n_expert_used = 0;            // expert_used_count
  int64_t n_ff_expert = 0;              // expert_feed_forward_length (or n_ff; qwen*moe: n_ff / n_expert_used)
  float rms_eps = 1e-5f;                // attention.layer_norm_rms_epsilon
  int64_t rope_dim = 0;                 // rope.dimension_count
  float rope_base = 10000.0f;           // rope.freq_base
  float rope_freq_scale = 1.0f;         // 1 / rope.scaling.factor (linear and yarn)
  RopeType rope_type = RopeType::norm;  // the architecture's (ArchTraits)

  // MoE routing details (deepseek2, qwen*moe).
  int64_t n_expert_shared = 0;                         // expert_shared_count: shared experts, always applied
  int64_t n_ff_shexp = 0;                              // expert_shared_feed_forward_length (qwen2moe; 0 = absent)
  int64_t n_layer_dense_lead = 0;                      // leading_dense_block_count: the first layers are dense
  ExpertGating expert_gating = ExpertGating::softmax;  // expert_gating_func
  bool expert_weights_norm = false;                    // expert_weights_norm: chosen weights renormalized to sum 1
  float expert_weights_scale = 0;                      // expert_weights_scale: 0 (absent) and 1 mean no scaling
  int64_t n_expert_groups = 0;                         // expert_group_count (0/1: no group-limited selection)
  int64_t n_group_used = 0;                            // expert_group_used_count

  // Multi-head latent attention (deepseek2).
  int64_t q_lora_rank = 0;     // attention.q_lora_rank (0: the query is one projection, attn_q)
  int64_t kv_lora_rank = 0;    // attention.kv_lora_rank: width of the cached latent
  int64_t head_dim_k_mla = 0;  // attention.key_length_mla (0: legacy file, key_length is the MHA key size)
  int64_t head_dim_v_mla = 0;  // attention.value_length_mla
  bool is_mla() const { return head_dim_k_mla > 0 && head_dim_v_mla > 0; }

  // DeepSeek sparse attention's lightning indexer (deepseek32, glm-dsa: their
  // file reads these, engine/arch/deepseek32.cpp). indexer_n_head 0: none.
  int64_t indexer_n_head = 0;    // attention.indexer.head_count
  int64_t indexer_head_dim = 0;  // attention.indexer.key_length
  int64_t indexer_top_k = 0;     // attention.indexer.top_k: past positions each query attends to
  // [n_layer] 1: the layer runs its indexer ("full"); 0: it reuses the last full
  // layer's selection ("shared", glm-dsa's attention.indexer.types).
  std::vector<uint8_t> indexer_full_layers;
  RopeType indexer_rope_type = RopeType::neox;  // the indexer's rope over its first rope_dim dims
  float indexer_norm_eps = 1e-6f;               // its key LayerNorm's epsilon
  // MiniMax sparse attention (minimax-m3, engine/layers/msa_indexer.h): the
  // indexer scores blocks of block_size positions and keeps top_k blocks, the
  // local_blocks ending at the query's own always among them.
  int64_t indexer_block_size = 0;    // attention.indexer.block_size
  int64_t indexer_local_blocks = 0;  // attention.indexer.local_blocks

  // Linear-attention (recurrent) layers: Kimi Delta Attention (kimi-linear, kimi-k3).
  int64_t ssm_d_conv = 0;    // ssm.conv_kernel: taps of the causal depthwise short convolution
  int64_t kda_head_dim = 0;  // kda.head_dim: the key/value head size of the KDA layers
  // kda.gate_lower_bound: when set (> -inf), the decay gate is lower_bound *
  // sigmoid(...) instead of A * softplus(...) (kimi-k3).
  float kda_gate_lower_bound = -std::numeric_limits<float>::infinity();

  // Gated DeltaNet layers (qwen3next, qwen35moe): ssm.state_size (head size),
  // ssm.group_count (key heads), ssm.time_step_rank (value heads),
  // ssm.inner_size (value heads * head size). ssm_d_conv above is shared.
  int64_t ssm_d_state = 0, ssm_n_group = 0, ssm_dt_rank = 0, ssm_d_inner = 0;
  // [n_layer]: 1 where the layer is recurrent (attention.recurrent_layers, or
  // every layer but each full_attention_interval-th, default 4, as the
  // reference derives it). Empty for the other architectures.
  std::vector<uint8_t> recurrent_layers;
  bool is_recurrent(int64_t il) const {
    return !recurrent_layers.empty() && recurrent_layers[static_cast<size_t>(il)] != 0;
  }
  // rope.dimension_sections (imrope's interleaved sections: qwen35moe; all 0: absent).
  int64_t rope_sections[4] = {0, 0, 0, 0};

  // kimi-k3 (llama.cpp's src/models/kimi-k3.cpp; its file reads these: ArchTraits::read_keys).
  int64_t attn_res_block_size = 0;  // attn_res.block_size: cross-layer attention residuals every N layers (0: off)
  int64_t n_expert_latent = 0;      // expert_latent_length: routed experts' width (0: n_embd, no latent MoE)
  // activation.situ_beta / situ_linear_beta: the situ activation's betas
  // (situ_beta > 0 selects situ; linear_beta <= 0 leaves the up branch as is).
  float situ_beta = 0.0f;
  float situ_linear_beta = 0.0f;
  // deepseek4 (DeepSeek V4; engine/arch/deepseek4.cpp reads these: ArchTraits::read_keys).
  struct Deepseek4 {
    int64_t hc = 0;                        // hyper_connection.count: residual streams per token
    int64_t hc_sinkhorn_iters = 0;         // hyper_connection.sinkhorn_iterations
    float hc_eps = 0.0f;                   // hyper_connection.epsilon
    int64_t hash_layers = 0;               // hash_layer_count: the first layers route by token id
    int64_t o_groups = 0;                  // attention.output_group_count
    int64_t o_lora_rank = 0;               // attention.output_lora_rank
    float compress_rope_base = 0.0f;       // attention.compress_rope_freq_base
    std::vector<int64_t> compress_ratios;  // attention.compress_ratios [n_layer]: 0, 4 or 128
    int64_t indexer_heads = 0, indexer_head_dim = 0, indexer_top_k = 0;  // attention.indexer.*
  } dsv4;
  // swiglu_clamp_exp / swiglu_clamp_shexp (deepseek4, bailingmoe3: their files
  // read these, read_swiglu_clamps): per block, the limit of the routed
  // experts' and of the other FFNs' clamped SwiGLU (<= 1e-6: no clamp); empty
  // when absent.
  std::vector<float> swiglu_clamp_exp, swiglu_clamp_shexp;
  // Routed experts' input and output width: the latent width, or n_embd.
  int64_t expert_width() const { return n_expert_latent > 0 ? n_expert_latent : n_embd; }

  // RoPE scaling (rope.scaling.*). YaRN as the reference applies it:
  // ext_factor mixes extrapolated and interpolated angles between the
  // correction dims given by beta_fast/beta_slow over n_ctx_orig.
  RopeScaling rope_scaling = RopeScaling::none;
  int64_t rope_n_ctx_orig = 0;                 // rope.scaling.original_context_length (or context_length)
  float rope_attn_factor = 1.0f;               // rope.scaling.attn_factor
  float yarn_ext_factor = 0.0f;                // rope.scaling.yarn_ext_factor (default 1 for yarn, else 0)
  float yarn_beta_fast = 32.0f;                // rope.scaling.yarn_beta_fast
  float yarn_beta_slow = 1.0f;                 // rope.scaling.yarn_beta_slow
  float yarn_log_mul = 0.0f;                   // rope.scaling.yarn_log_multiplier as stored (0.1 * mscale_all_dim)
  YarnMscale yarn_mscale = YarnMscale::plain;  // how yarn_log_mul is read (ArchTraits)

  // Sliding-window attention (gpt-oss). A sliding layer's query at position p
  // attends to positions p - n_swa + 1 .. p only (the reference's "standard"
  // window). Which layers slide: attention.sliding_window_pattern, a per-layer
  // bool array or a period n (layer il slides when il % n < n - 1; the
  // architecture's default period when absent: gpt-oss 2, even layers slide).
  int64_t n_swa = 0;                // attention.sliding_window (0: no sliding layers)
  std::vector<uint8_t> swa_layers;  // [n_layer] 1 = sliding; empty: none
  float rope_base_swa = 0.0f;       // rope.freq_base_swa: sliding layers' RoPE base (default rope_base)
  bool is_swa(int64_t il) const { return !swa_layers.empty() && swa_layers[static_cast<size_t>(il)] != 0; }

  bool is_moe() const { return n_expert > 0; }
  // Reads the keys of general.architecture's namespace, with that
  // architecture's traits. The engine calls it through read_hparams
  // (engine/arch/architecture.h), which first refuses an architecture this
  // build does not run, naming it, and finds its traits.
  static Hparams from_gguf(const gguf::GgufFile& f, const ArchTraits& traits);
};

// For an architecture's ArchTraits::read_keys: the bad_model error naming the
// file and the key ("<file>: metadata key '<key>' <why>") ...
[[noreturn]] void bad_hparam(const gguf::GgufFile& f, const std::string& key, const std::string& why);
// ... and a count that may be absent (0), at most max.
int64_t optional_hparam_count(const gguf::GgufFile& f, const std::string& key, uint64_t max);
// For read_keys: swiglu_clamp_exp and swiglu_clamp_shexp into h, each an
// array of at least block_count entries or one number for every block.
void read_swiglu_clamps(const gguf::GgufFile& f, const std::string& prefix, Hparams& h);

}  // namespace ns
