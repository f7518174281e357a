#include "tools/make_model/architecture.h"

#include <algorithm>

#include "common/error.h"

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
