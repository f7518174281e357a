// Hyperparameters of a model, read from its GGUF metadata (`<arch>.*` keys).
// One struct for every architecture; fields an architecture lacks keep their
// defaults. Validated on load: a value that would make the forward pass
// divide by zero or index out of range is rejected with the key's name.
#pragma once

#include <cstdint>
#include <string>

namespace ns::gguf {
class GgufFile;
}

namespace ns {

enum class RopeType { norm, neox };  // adjacent pairs (llama) or split halves (neox)

struct Hparams {
  std::string arch;             // general.architecture
  std::string name;             // general.name
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;      // context_length
  int64_t n_embd = 0;           // embedding_length
  int64_t n_layer = 0;          // block_count
  int64_t n_head = 0;           // attention.head_count
  int64_t n_head_kv = 0;        // attention.head_count_kv
  int64_t head_dim = 0;         // attention.key_length or n_embd / n_head
  int64_t n_ff = 0;             // feed_forward_length (dense layers)
  int64_t n_expert = 0;         // expert_count (0 = dense)
  int64_t n_expert_used = 0;    // expert_used_count
  int64_t n_ff_expert = 0;      // expert_feed_forward_length (or n_ff)
  float rms_eps = 1e-5f;        // attention.layer_norm_rms_epsilon
  int64_t rope_dim = 0;         // rope.dimension_count
  float rope_base = 10000.0f;   // rope.freq_base
  float rope_freq_scale = 1.0f; // 1 / rope.scaling.factor for linear scaling
  RopeType rope_type = RopeType::norm;

  bool is_moe() const { return n_expert > 0; }
  static Hparams from_gguf(const gguf::GgufFile& f);
};

}  // namespace ns
