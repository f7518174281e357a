#include "engine/model/hparams.h"

#include "engine/gguf/gguf_file.h"
#include "engine/util/error.h"

namespace ns {
namespace {

[[noreturn]] void bad(const gguf::GgufFile& f, const std::string& key, const std::string& why) {
  throw Error(ErrorKind::bad_model, f.path() + ": metadata key '" + key + "' " + why);
}

int64_t positive(const gguf::GgufFile& f, const std::string& key, uint64_t max = 1ull << 31) {
  const uint64_t v = f.get_u64(key);
  if (v == 0 || v > max) bad(f, key, "is " + std::to_string(v) + ", expected 1.." + std::to_string(max));
  return static_cast<int64_t>(v);
}

}  // namespace

Hparams Hparams::from_gguf(const gguf::GgufFile& f) {
  Hparams h;
  h.arch = f.get_string("general.architecture");
  h.name = f.get_string_or("general.name", "");
  const std::string a = h.arch + ".";
  h.n_embd = positive(f, a + "embedding_length", 1 << 20);
  h.n_layer = positive(f, a + "block_count", 4096);
  h.n_head = positive(f, a + "attention.head_count", 4096);
  h.n_head_kv = f.has(a + "attention.head_count_kv") ? positive(f, a + "attention.head_count_kv", 4096) : h.n_head;
  if (h.n_head % h.n_head_kv != 0)
    bad(f, a + "attention.head_count_kv", "(" + std::to_string(h.n_head_kv) + ") must divide head_count (" +
                                              std::to_string(h.n_head) + ")");
  h.head_dim = f.has(a + "attention.key_length") ? positive(f, a + "attention.key_length", 1 << 16) : h.n_embd / h.n_head;
  if (h.head_dim == 0) bad(f, a + "attention.head_count", "is larger than embedding_length");
  h.n_ff = f.has(a + "feed_forward_length") ? positive(f, a + "feed_forward_length", 1 << 24) : 0;
  h.n_ctx_train = static_cast<int64_t>(f.get_u64_or(a + "context_length", 2048));
  h.n_expert = static_cast<int64_t>(f.get_u64_or(a + "expert_count", 0));
  if (h.n_expert > 0) {
    if (h.n_expert > (1 << 16)) bad(f, a + "expert_count", "is " + std::to_string(h.n_expert) + ", at most 65536 supported");
    h.n_expert_used = positive(f, a + "expert_used_count", static_cast<uint64_t>(h.n_expert));
    h.n_ff_expert = f.has(a + "expert_feed_forward_length") ? positive(f, a + "expert_feed_forward_length", 1 << 24)
                                                            : h.n_ff;
  }
  h.rms_eps = static_cast<float>(f.get_f64_or(a + "attention.layer_norm_rms_epsilon", 1e-5));
  if (!(h.rms_eps > 0 && h.rms_eps < 1)) bad(f, a + "attention.layer_norm_rms_epsilon", "must be in (0, 1)");
  h.rope_dim = static_cast<int64_t>(f.get_u64_or(a + "rope.dimension_count", static_cast<uint64_t>(h.head_dim)));
  if (h.rope_dim <= 0 || h.rope_dim > h.head_dim || h.rope_dim % 2)
    bad(f, a + "rope.dimension_count", "is " + std::to_string(h.rope_dim) + ", expected an even number up to the head size " +
                                           std::to_string(h.head_dim));
  h.rope_base = static_cast<float>(f.get_f64_or(a + "rope.freq_base", 10000.0));
  if (!(h.rope_base > 1)) bad(f, a + "rope.freq_base", "must be greater than 1");
  const std::string scaling = f.get_string_or(a + "rope.scaling.type", "none");
  if (scaling == "linear") {
    const double factor = f.get_f64_or(a + "rope.scaling.factor", 1.0);
    if (!(factor > 0)) bad(f, a + "rope.scaling.factor", "must be positive");
    h.rope_freq_scale = static_cast<float>(1.0 / factor);
  } else if (scaling != "none") {
    bad(f, a + "rope.scaling.type", "'" + scaling + "' is not supported yet (supported: none, linear)");
  }
  if (h.arch == "qwen2moe" || h.arch == "qwen3moe" || h.arch == "qwen2" || h.arch == "qwen3") h.rope_type = RopeType::neox;
  return h;
}

}  // namespace ns
