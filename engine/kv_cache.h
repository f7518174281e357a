// The key/value cache: allocated once at load for n_ctx positions, never
// resized in the token loop. Layout per layer: [position][kv_dim] floats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ns {

class KvCache {
 public:
  KvCache(int64_t n_layer, int64_t n_ctx, int64_t k_dim, int64_t v_dim);

  int64_t n_ctx() const { return n_ctx_; }
  int64_t k_dim() const { return k_dim_; }
  int64_t v_dim() const { return v_dim_; }
  float* k(int64_t layer, int64_t pos) { return k_.data() + (layer * n_ctx_ + pos) * k_dim_; }
  float* v(int64_t layer, int64_t pos) { return v_.data() + (layer * n_ctx_ + pos) * v_dim_; }
  uint64_t bytes() const { return (k_.size() + v_.size()) * sizeof(float); }
  uint64_t bytes_per_token() const { return static_cast<uint64_t>(n_layer_ * (k_dim_ + v_dim_)) * sizeof(float); }

 private:
  int64_t n_layer_, n_ctx_, k_dim_, v_dim_;
  std::vector<float> k_, v_;
};

}  // namespace ns
