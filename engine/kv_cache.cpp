#include "engine/kv_cache.h"

namespace ns {

KvCache::KvCache(int64_t n_layer, int64_t n_seq, int64_t n_ctx, int64_t k_dim, int64_t v_dim)
    : n_layer_(n_layer), n_seq_(n_seq), n_ctx_(n_ctx), k_dim_(k_dim), v_dim_(v_dim),
      k_(static_cast<size_t>(n_layer * n_seq * n_ctx * k_dim)), v_(static_cast<size_t>(n_layer * n_seq * n_ctx * v_dim)) {}

}  // namespace ns
