// Where each expert's weights lie in a model's GGUF files (one file, or the shards of a split set:
// each stack's file index and offset), and how a cache slot holds them.
//
// Streamed tensors are the routed experts' stacks: which tensors those are is
// the architecture's tensor table's answer (their role, engine/spec/tensor_role.h),
// which the caller hands over; this layer only lays them out. Each is a
// blk.N.ffn_{gate,up,down}_exps.weight (ggml dims [cols, rows, n_expert]:
// expert e's matrix is the e-th contiguous block of the tensor), its name
// giving its layer and its place in a slot. Everything else (attention,
// norms, routers, shared experts, dense FFNs, embeddings, output) is resident.
//
// A cache slot holds one expert of any layer: the three projections at fixed
// offsets, each with room for its O_DIRECT aligned superset.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/gguf/gguf_file.h"

namespace ns::stream {

enum class Projection : uint8_t { gate = 0, up = 1, down = 2 };
inline constexpr int kProjections = 3;
const char* projection_name(Projection p);  // "gate", "up", "down"

struct ProjectionLayout {
  uint64_t offset = 0;        // absolute offset of expert 0 in `file`
  uint64_t expert_bytes = 0;  // one expert's matrix (= the stride between experts)
  gguf::GgmlType type = gguf::GgmlType::F32;
  uint64_t rows = 0, cols = 0;
  uint32_t file = 0;  // the model file (shard, gguf_set.h) holding the stack: the reader's file index
  uint64_t offset_of(uint32_t expert) const { return offset + expert * expert_bytes; }
};

struct LayerExperts {
  uint32_t n_expert = 0;  // 0: not an MoE layer
  std::array<ProjectionLayout, kProjections> proj{};
  uint64_t expert_bytes() const { return proj[0].expert_bytes + proj[1].expert_bytes + proj[2].expert_bytes; }
  // gate, up and down of `expert` follow each other in one file (a repacked layout): one read.
  bool contiguous(uint32_t expert) const;
};

class ExpertLayout {
 public:
  // The layout of `routed`, the routed stacks (Model::routed_tensors(): the
  // table's routed roles). Throws ns::Error(bad_model), naming `source` and
  // the tensor, when a layer has some but not all of the three stacks, their
  // expert counts differ, a stack is not 3-D or not evenly divisible by its
  // expert count, or a stack is not one this build can stream (e.g. fused
  // gate_up stacks).
  static ExpertLayout from_tensors(std::span<const gguf::TensorInfo> routed, const std::string& source);

  // A routed stack's layer and projection, from its name; throws bad_model for
  // a stack this build cannot stream.
  static void parse_streamed_name(std::string_view name, uint32_t* layer, Projection* proj);

  uint32_t n_layers() const { return static_cast<uint32_t>(layers_.size()); }  // last MoE layer + 1
  uint32_t n_experts() const { return n_experts_; }                            // most of any layer
  uint32_t n_moe_layers() const { return n_moe_layers_; }
  bool is_moe_layer(uint32_t l) const { return l < layers_.size() && layers_[l].n_expert > 0; }
  const LayerExperts& layer(uint32_t l) const { return layers_.at(l); }

  // Slot geometry: projection p starts at slot_offset(p) and has slot_capacity(p) bytes.
  uint64_t slot_bytes() const { return slot_bytes_; }
  uint64_t slot_offset(Projection p) const { return slot_offset_[static_cast<int>(p)]; }
  uint64_t slot_capacity(Projection p) const { return slot_capacity_[static_cast<int>(p)]; }

  uint64_t total_experts() const { return total_experts_; }           // sum of n_expert over layers
  uint32_t n_stacks() const { return n_moe_layers_ * kProjections; }  // the routed tensors laid out
  uint64_t total_bytes() const { return total_bytes_; }               // all streamed bytes
  uint64_t largest_expert_bytes() const { return largest_expert_bytes_; }

 private:
  std::vector<LayerExperts> layers_;
  uint32_t n_experts_ = 0, n_moe_layers_ = 0;
  std::array<uint64_t, kProjections> slot_offset_{}, slot_capacity_{};
  uint64_t slot_bytes_ = 0, total_experts_ = 0, total_bytes_ = 0, largest_expert_bytes_ = 0;
};

}  // namespace ns::stream
