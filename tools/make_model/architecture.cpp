#include "tools/make_model/architecture.h"

#include <algorithm>

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
