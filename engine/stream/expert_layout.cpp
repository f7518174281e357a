#include "engine/stream/expert_layout.h"

#include <algorithm>
#include <charconv>

#include "engine/stream/direct_io.h"
#include "common/error.h"

namespace ns::stream {
namespace {

constexpr std::array<std::string_view, kProjections> kStackNames = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};

// "blk.<n>.<rest>": the layer number and <rest>; false for other names.
bool split_block_name(std::string_view name, uint32_t* layer, std::string_view* rest) {
  constexpr std::string_view prefix = "blk.";
  if (name.substr(0, prefix.size()) != prefix) return false;
  const char* first = name.data() + prefix.size();
  const char* last = name.data() + name.size();
  auto [p, ec] = std::from_chars(first, last, *layer);
  if (ec != std::errc() || p == first || p == last || *p != '.') return false;
  *rest = std::string_view(p + 1, static_cast<size_t>(last - p - 1));
  return true;
}

}  // namespace

const char* projection_name(Projection p) {
  switch (p) {
    case Projection::gate: return "gate";
    case Projection::up: return "up";
    case Projection::down: return "down";
  }
  return "?";
}

bool LayerExperts::contiguous(uint32_t expert) const {
  return proj[1].file == proj[0].file && proj[2].file == proj[0].file &&
         proj[1].offset_of(expert) == proj[0].offset_of(expert) + proj[0].expert_bytes &&
         proj[2].offset_of(expert) == proj[1].offset_of(expert) + proj[1].expert_bytes;
}

void ExpertLayout::parse_streamed_name(std::string_view name, uint32_t* layer, Projection* proj) {
  std::string_view rest;
  if (split_block_name(name, layer, &rest))
    for (int p = 0; p < kProjections; ++p)
      if (rest == std::string(kStackNames[static_cast<size_t>(p)]) + ".weight") {
        *proj = static_cast<Projection>(p);
        return;
      }
  throw Error(ErrorKind::bad_model, "tensor '" + std::string(name) +
                                        "' is a routed-expert stack this build cannot stream (expected "
                                        "blk.N.ffn_{gate,up,down}_exps.weight)");
}

ExpertLayout ExpertLayout::from_tensors(std::span<const gguf::TensorInfo> routed, const std::string& source) {
  ExpertLayout L;
  std::vector<std::array<const gguf::TensorInfo*, kProjections>> found;
  for (const gguf::TensorInfo& t : routed) {
    uint32_t layer = 0;
    Projection p{};
    try {
      parse_streamed_name(t.name, &layer, &p);
    } catch (const Error& e) {
      throw Error(ErrorKind::bad_model, source + ": " + e.what());
    }
    if (layer >= found.size()) found.resize(layer + 1, {nullptr, nullptr, nullptr});
    found[layer][static_cast<size_t>(p)] = &t;
  }
  L.layers_.resize(found.size());
  for (uint32_t l = 0; l < found.size(); ++l) {
    const auto& f = found[l];
    if (!f[0] && !f[1] && !f[2]) continue;
    LayerExperts& le = L.layers_[l];
    for (int p = 0; p < kProjections; ++p) {
      const std::string name =
          "blk." + std::to_string(l) + "." + std::string(kStackNames[static_cast<size_t>(p)]) + ".weight";
      const gguf::TensorInfo* t = f[static_cast<size_t>(p)];
      if (!t)
        throw Error(ErrorKind::bad_model,
                    source + ": layer " + std::to_string(l) + " has routed experts but no '" + name + "'");
      if (t->dims.size() != 3 || t->dims[2] == 0 || t->nbytes % t->dims[2] != 0)
        throw Error(ErrorKind::bad_model, source + ": tensor '" + name + "' " + t->shape_string() +
                                              " is not a stack of equal expert matrices [cols, rows, n_expert]");
      const auto n = static_cast<uint32_t>(t->dims[2]);
      if (p > 0 && n != le.n_expert)
        throw Error(ErrorKind::bad_model, source + ": tensor '" + name + "' has " + std::to_string(n) +
                                              " experts but '" + f[0]->name + "' has " + std::to_string(le.n_expert));
      le.n_expert = n;
      ProjectionLayout& pl = le.proj[static_cast<size_t>(p)];
      pl.file = t->file;
      pl.offset = t->offset;
      pl.expert_bytes = t->nbytes / n;
      pl.type = t->type;
      pl.cols = t->dims[0];
      pl.rows = t->dims[1];
      L.slot_capacity_[static_cast<size_t>(p)] =
          std::max(L.slot_capacity_[static_cast<size_t>(p)], direct_read_capacity(pl.expert_bytes));
    }
    L.n_experts_ = std::max(L.n_experts_, le.n_expert);
    ++L.n_moe_layers_;
    L.total_experts_ += le.n_expert;
    L.total_bytes_ += le.expert_bytes() * le.n_expert;
    L.largest_expert_bytes_ = std::max(L.largest_expert_bytes_, le.expert_bytes());
  }
  uint64_t at = 0;
  for (int p = 0; p < kProjections; ++p) {
    L.slot_offset_[static_cast<size_t>(p)] = at;
    at += L.slot_capacity_[static_cast<size_t>(p)];
  }
  L.slot_bytes_ = at;
  return L;
}

}  // namespace ns::stream
