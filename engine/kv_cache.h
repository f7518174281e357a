// The key/value cache: allocated once at load for n_seq sequences of n_ctx
// positions each, never resized in the token loop. Layout:
// [layer][sequence][position][kv_dim], stored as
// F16 like the reference implementation (half the memory of F32, and the
// same rounding, which keeps near-tied MoE routing decisions identical).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ns {

class KvCache {
 public:
  KvCache(int64_t n_layer, int64_t n_seq, int64_t n_ctx, int64_t k_dim, int64_t v_dim);

  int64_t n_seq() const { return n_seq_; }
  int64_t n_ctx() const { return n_ctx_; }
  int64_t k_dim() const { return k_dim_; }
  int64_t v_dim() const { return v_dim_; }
  uint16_t* k(int64_t layer, int64_t seq, int64_t pos) { return k_.data() + row(layer, seq, pos) * k_dim_; }
  uint16_t* v(int64_t layer, int64_t seq, int64_t pos) { return v_.data() + row(layer, seq, pos) * v_dim_; }
  uint64_t bytes() const { return (k_.size() + v_.size()) * sizeof(uint16_t); }
  uint64_t bytes_per_token() const { return static_cast<uint64_t>(n_layer_ * (k_dim_ + v_dim_)) * sizeof(uint16_t); }

 private:
  int64_t row(int64_t layer, int64_t seq, int64_t pos) const { return (layer * n_seq_ + seq) * n_ctx_ + pos; }
  int64_t n_layer_, n_seq_, n_ctx_, k_dim_, v_dim_;
  std::vector<uint16_t> k_, v_;
};

}  // namespace ns
