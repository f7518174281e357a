#include "tools/make_model/architecture.h"

#include <algorithm>

#include "common/error.h"
#include "engine/spec/metadata_keys.h"

namespace ns::make_model {
namespace {

// Function-local so registration from other files' static initializers is safe.
std::vector<std::unique_ptr<Architecture>>& registry() {
  static std::vector<std::unique_ptr<Architecture>> archs;
  return archs;
}

}  // namespace

ArchitectureRegistrar::ArchitectureRegistrar(std::unique_ptr<Architecture> arch) {
  auto& archs = registry();
  archs.push_back(std::move(arch));
  // Sorted by name so --help and messages do not depend on link order.
  std::sort(archs.begin(), archs.end(), [](const auto& a, const auto& b) { return a->name() < b->name(); });
}

void validate_moe_shape(const Shape& s, const std::string& arch) {
  auto bad = [&arch](const std::string& m) { throw Error(ErrorKind::invalid_input, arch + ": " + m); };
  if (s.n_embd == 0 || s.n_layer == 0 || s.n_head == 0 || s.n_head_kv == 0 || s.n_ff == 0 || s.n_ctx == 0)
    bad("--n-embd, --n-layer, --n-head, --n-head-kv, --n-ff and --n-ctx must be positive");
  if (s.n_head % s.n_head_kv != 0) bad("--n-head must be a multiple of --n-head-kv");
  if (s.n_expert == 0 || s.n_expert_used == 0 || s.n_expert_used > s.n_expert)
    bad("every layer is MoE: --n-expert and --n-expert-used (1..--n-expert) are required");
}

void add_trunk_metadata(gguf::GgufWriter& w, const std::string& arch, const Shape& s, uint32_t block_count,
                        uint32_t head_count_kv, BlockCountAt at) {
  using namespace gguf;
  const std::string a = arch + ".";
  if (at == BlockCountAt::first) w.set(a + keys::block_count, val::u32(block_count));
  w.set(a + keys::context_length, val::u32(s.n_ctx));
  w.set(a + keys::embedding_length, val::u32(s.n_embd));
  if (at == BlockCountAt::after_embedding) w.set(a + keys::block_count, val::u32(block_count));
  w.set(a + keys::feed_forward_length, val::u32(s.n_ff));
  w.set(a + keys::attention_head_count, val::u32(s.n_head));
  w.set(a + keys::attention_head_count_kv, val::u32(head_count_kv));
  w.set(a + keys::rope_freq_base, val::f32(s.rope_base));
  w.set(a + keys::attention_layer_norm_rms_epsilon, val::f32(s.rms_eps));
}

void add_yarn_metadata(gguf::GgufWriter& w, const std::string& arch, float factor, uint32_t orig_ctx) {
  if (factor == 0.0f) return;
  using namespace gguf;
  const std::string a = arch + ".";
  w.set(a + keys::rope_scaling_type, val::str("yarn"));
  w.set(a + keys::rope_scaling_factor, val::f32(factor));
  w.set(a + keys::rope_scaling_original_context_length, val::u32(orig_ctx));
}

Architecture* find_architecture(const std::string& name) {
  for (auto& a : registry())
    if (a->name() == name) return a.get();
  return nullptr;
}

std::vector<Architecture*> all_architectures() {
  std::vector<Architecture*> out;
  for (auto& a : registry()) out.push_back(a.get());
  return out;
}

std::string architecture_names() {
  std::string s;
  for (auto& a : registry()) s += (s.empty() ? "" : ", ") + a->name();
  return s;
}

}  // namespace ns::make_model
