// The shared parts of the importance-weighted i-quant quantizers (see the
// header). Built without -mfma, as ggml-quants.c is in the reference build.
#include "tools/quantize/iq_quant_search.h"

#include <algorithm>
#include <cfloat>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <string>

#include "engine/kernels/iq_tables.h"
#include "engine/kernels/kquant_search.h"
#include "common/error.h"

namespace ns::kernels::iq {
namespace {

// The level a byte of a dequantization grid stands for.
int level_of(SearchGrid g, uint8_t b) {
  if (g == SearchGrid::iq1s) return static_cast<int8_t>(b) + 1;  // -1, 0, 1
  if (g == SearchGrid::iq3xxs) return b / 8;                     // 0x04 + 8l, 0x3e for 7
  return b == 0x08 ? 0 : b == 0x19 ? 1 : 2;                      // 0x08, 0x19, 0x2b
}

GridSearch build(SearchGrid g) {
  GridSearch s;
  const bool iq3 = g == SearchGrid::iq3xxs;
  s.group = iq3 ? 4 : 8;
  s.bits = iq3 ? 3 : 2;
  const int size = g == SearchGrid::iq2xxs || iq3 ? 256 : g == SearchGrid::iq2xs ? 512 : 2048;
  const int nwant = g == SearchGrid::iq1s ? 3 : 2;
  const int max_level = iq3 ? 7 : 2, mask = (1 << s.bits) - 1;
  // Keys up to every level at its largest (ggml's map sizes: 43692, 4096).
  const int map_size = iq3 ? 4096 : 43692;
  const auto entry = [&](int e) {
    return iq3 ? static_cast<uint64_t>(kIq3xxsGrid[e])
               : (g == SearchGrid::iq2xxs  ? kIq2xxsGrid
                  : g == SearchGrid::iq2xs ? kIq2xsGrid
                                           : kIq1sGrid)[e];
  };
  s.level.resize(static_cast<size_t>(size));
  s.map.assign(static_cast<size_t>(map_size), -1);
  for (int e = 0; e < size; ++e) {
    uint16_t u = 0;
    for (int j = 0; j < s.group; ++j) {
      const int l = level_of(g, static_cast<uint8_t>(entry(e) >> (8 * j)));
      s.level[static_cast<size_t>(e)] |= static_cast<uint64_t>(2 * l + 1) << (8 * j);
      u = static_cast<uint16_t>(u | (l << (s.bits * j)));
    }
    s.map[u] = e;
  }
  // Off-grid keys: squared distances are at most group * (2 * max_level)^2,
  // so a histogram finds the nwant-th distinct distance, then the entries
  // within it are listed by distance and index (ggml sorts (distance, index)
  // pairs).
  const int max_d2 = s.group * 4 * max_level * max_level;
  std::vector<int> d2(static_cast<size_t>(size));
  std::vector<int> count(static_cast<size_t>(max_d2) + 1);
  for (int u = 0; u < map_size; ++u) {
    if (s.map[u] >= 0) continue;
    bool valid = true;
    for (int j = 0; j < s.group; ++j) valid = valid && ((u >> (s.bits * j)) & mask) <= max_level;
    if (!valid) continue;
    std::fill(count.begin(), count.end(), 0);
    for (int e = 0; e < size; ++e) {
      int d = 0;
      for (int j = 0; j < s.group; ++j) {
        const int diff = 2 * (grid_level(s, e, j) - ((u >> (s.bits * j)) & mask));
        d += diff * diff;
      }
      d2[static_cast<size_t>(e)] = d;
      ++count[d];
    }
    int limit = 0, distinct = 0, n = 0;
    for (int d = 0; d <= max_d2 && distinct < nwant; ++d)
      if (count[d] > 0) {
        ++distinct;
        limit = d;
        n += count[d];
      }
    s.map[u] = -1 - static_cast<int32_t>(s.lists.size());
    s.lists.push_back(static_cast<uint16_t>(n));
    for (int d = 0; d <= limit; ++d) {
      if (count[d] == 0) continue;
      for (int e = 0; e < size; ++e)
        if (d2[static_cast<size_t>(e)] == d) s.lists.push_back(static_cast<uint16_t>(e));
    }
  }
  return s;
}

}  // namespace

const GridSearch& grid_search(SearchGrid g) {
  static const GridSearch iq2xxs = build(SearchGrid::iq2xxs);
  if (g == SearchGrid::iq2xxs) return iq2xxs;
  if (g == SearchGrid::iq2xs) {
    static const GridSearch iq2xs = build(SearchGrid::iq2xs);
    return iq2xs;
  }
  if (g == SearchGrid::iq3xxs) {
    static const GridSearch iq3xxs = build(SearchGrid::iq3xxs);
    return iq3xxs;
  }
  static const GridSearch iq1s = build(SearchGrid::iq1s);
  return iq1s;
}

float make_qp_quants(int n, int nmax, const float* x, uint8_t* L, const float* w) {
  float max = 0;
  for (int i = 0; i < n; ++i) max = std::max(max, x[i]);
  if (max < kq::kGroupMaxEps) {
    std::memset(L, 0, static_cast<size_t>(n));
    return 0.0f;
  }
  const auto fl = [](int l) { return static_cast<float>(l); };
  float iscale = fl(nmax) / max;
  for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(kq::nearest_int(iscale * x[i]));
  const float scale = 1 / iscale;
  float best_mse = 0;
  for (int i = 0; i < n; ++i) {
    const float diff = x[i] - scale * fl(L[i]);
    best_mse += w[i] * diff * diff;
  }
  for (int is = -4; is <= 4; ++is) {
    if (is == 0) continue;
    const float iscale_is = (0.1f * fl(is) + fl(nmax)) / max;
    const float scale_is = 1 / iscale_is;
    float mse = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::min(nmax, kq::nearest_int(iscale_is * x[i]));
      const float diff = x[i] - scale_is * fl(l);
      mse += w[i] * diff * diff;
    }
    if (mse < best_mse) {
      best_mse = mse;
      iscale = iscale_is;
    }
  }
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::min(nmax, kq::nearest_int(iscale * x[i]));
    L[i] = static_cast<uint8_t>(l);
    sumlx += w[i] * x[i] * fl(l);
    suml2 += w[i] * fl(l) * fl(l);
  }
  for (int itry = 0; itry < 5; ++itry) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      float slx = sumlx - w[i] * x[i] * fl(L[i]);
      float sl2 = suml2 - w[i] * fl(L[i]) * fl(L[i]);
      if (slx > 0 && sl2 > 0) {
        const int l = std::min(nmax, kq::nearest_int(x[i] * sl2 / slx));
        if (l != L[i]) {
          slx += w[i] * x[i] * fl(l);
          sl2 += w[i] * fl(l) * fl(l);
          if (slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<uint8_t>(l);
            sumlx = slx;
            suml2 = sl2;
            ++changed;
          }
        }
      }
    }
    if (!changed) break;
  }
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

void importance_weights(int n, const float* importance, const float* x, float sigma2, float* weight) {
  for (int i = 0; i < n; ++i) weight[i] = importance[i] * std::sqrt(sigma2 + x[i] * x[i]);
}

float sum_squares(const float* x, int n) {
  float s = 0;
  for (int i = 0; i < n; ++i) s += x[i] * x[i];
  return s;
}

namespace {
struct Pair {
  float x;
  int index;
};
int by_value(const void* a, const void* b) {
  const float l = static_cast<const Pair*>(a)->x, r = static_cast<const Pair*>(b)->x;
  return l < r ? -1 : l > r ? 1 : 0;
}
}  // namespace

void sorted_order(const float* x, int n, int* order) {
  Pair pairs[32];
  for (int j = 0; j < n; ++j) pairs[j] = {x[j], j};
  std::qsort(pairs, static_cast<size_t>(n), sizeof(Pair), by_value);
  for (int j = 0; j < n; ++j) order[j] = pairs[j].index;
}

int best_neighbour(const GridSearch& s, uint16_t u, const float* xval, const float* weight, float scale,
                   const float* xg, int8_t* L) {
  const uint16_t* nb = s.neighbours(u);
  float best = FLT_MAX;
  int index = -1;
  for (int k = 1; k <= nb[0]; ++k) {
    float d2 = 0;
    for (int j = 0; j < s.group; ++j) {
      const float q = xg[grid_level(s, nb[k], j)];
      const float diff = scale * q - xval[j];
      d2 += weight[j] * diff * diff;
    }
    if (d2 < best) {
      best = d2;
      index = nb[k];
    }
  }
  if (index < 0) throw Error(ErrorKind::invalid_input, "i-quant quantizer: non-finite weights or importance");
  for (int j = 0; j < s.group; ++j) L[j] = static_cast<int8_t>(grid_level(s, index, j));
  return index;
}

uint8_t fold_signs(const float* xb, const float* weight, float* xval) {
  int nflip = 0;
  uint8_t sg = 0;
  for (int i = 0; i < 8; ++i) {
    xval[i] = xb[i] >= 0 ? xb[i] : -xb[i];
    if (xb[i] < 0) {
      ++nflip;
      sg = static_cast<uint8_t>(sg | (1 << i));
    }
  }
  if (nflip % 2) {
    int imin = 0;
    float min = weight[0] * xb[0] * xb[0];
    for (int i = 1; i < 8; ++i) {
      const float ax = weight[i] * xb[i] * xb[i];
      if (ax < min) {
        min = ax;
        imin = i;
      }
    }
    xval[imin] = -xval[imin];
    sg = static_cast<uint8_t>(sg ^ (1 << imin));
  }
  return sg & 127;
}

float fold_block(int n, const float* xb, const float* importance, float sigma2, float* weight, float* waux, float* xval,
                 uint8_t* signs) {
  if (importance)
    importance_weights(n, importance, xb, sigma2, weight);
  else
    for (int i = 0; i < n; ++i) weight[i] = xb[i] * xb[i];
  for (int i = 0; i < n; ++i) waux[i] = std::sqrt(weight[i]);
  for (int k = 0; k < n / 8; ++k) signs[k] = fold_signs(xb + 8 * k, weight + 8 * k, xval + 8 * k);
  float max = xval[0];
  for (int i = 1; i < n; ++i) max = std::max(max, xval[i]);
  return max;
}

int odd_level(float x, float id, int nmax) { return std::clamp(kq::nearest_int(0.5f * (id * x - 1)), 0, nmax); }

void odd_levels(const float* xval, float id, int8_t* L) {
  for (int j = 0; j < 8; ++j) L[j] = static_cast<int8_t>(odd_level(xval[j], id, 2));
}

int snap_odd(const GridSearch& s, int8_t* L, const float* xval, const float* waux, float scale) {
  static constexpr float kOdd[3] = {1, 3, 5};
  const uint16_t u = grid_key(L);
  const int e = s.on_grid(u);
  return e >= 0 ? e : best_neighbour(s, u, xval, waux, scale, kOdd, L);
}

void odd_fit(int n, const float* xval, const float* weight, const int8_t* L, float& sumqx, float& sumq2) {
  sumqx = sumq2 = 0;
  for (int i = 0; i < n; ++i) {
    const float q = static_cast<float>(2 * L[i] + 1);
    sumqx += weight[i] * xval[i] * q;
    sumq2 += weight[i] * q * q;
  }
}

void refit_scale(int n, const float* xval, const float* weight, const int8_t* L, float& scale) {
  float sumqx, sumq2;
  odd_fit(n, xval, weight, L, sumqx, sumq2);
  if (sumq2 > 0) scale = sumqx / sumq2;
}

bool take_better_fit(int n, const float* xval, const float* weight, const int8_t* Laux, float& scale, float& best,
                     int8_t* L) {
  float sumqx, sumq2;
  odd_fit(n, xval, weight, Laux, sumqx, sumq2);
  if (!(sumq2 > 0 && sumqx * sumqx > best * sumq2)) return false;
  scale = sumqx / sumq2;
  best = scale * sumqx;
  std::memcpy(L, Laux, static_cast<size_t>(n));
  return true;
}

void search_scale(const GridSearch& s, const ScaleSearch& p, float max, const float* xval, const float* weight,
                  const float* waux, int8_t* L, float& scale) {
  const int groups = p.n / p.group;
  int8_t Laux[32];
  bool on_grid[8];
  std::fill(on_grid, on_grid + groups, p.track_on_grid);
  float best = 0;
  for (int is = -p.steps; is <= p.steps; ++is) {
    const float id = (static_cast<float>(2 * p.max_q - 1) + static_cast<float>(is) * p.step) / max;
    const float this_scale = 1 / id;
    bool on_grid_aux[8];
    for (int k = 0; k < groups; ++k) {
      int8_t* Lk = Laux + p.group * k;
      p.levels(xval + p.group * k, id, Lk);
      if (p.track_on_grid) on_grid_aux[k] = s.on_grid(grid_key(s, Lk)) >= 0;
      p.snap(s, Lk, xval + p.group * k, waux + p.group * k, this_scale);
    }
    if (take_better_fit(p.n, xval, weight, Laux, scale, best, L) && p.track_on_grid)
      std::copy(on_grid_aux, on_grid_aux + groups, on_grid);
  }
  if (std::count(on_grid, on_grid + groups, false) == 0 || !(scale > 0)) return;
  const float id = 1 / scale;
  for (int k = 0; k < groups; ++k) {
    if (on_grid[k]) continue;
    p.levels(xval + p.group * k, id, L + p.group * k);
    p.snap(s, L + p.group * k, xval + p.group * k, waux + p.group * k, scale);
  }
  refit_scale(p.n, xval, weight, L, scale);
}

bool fit_sub_block(const GridSearch& s, const ScaleSearch& p, const float* xb, const float* importance, float sigma2,
                   const char* format, float& scale, int* entries, uint8_t* signs) {
  float weight[32], waux[32], xval[32];
  int8_t L[32] = {};
  const float max = fold_block(p.n, xb, importance, sigma2, weight, waux, xval, signs);
  if (max < p.group_max_eps) return false;
  float search_max = max;
  if (p.qp_start) {
    scale = make_qp_quants(p.n, p.max_q + 1, xval, reinterpret_cast<uint8_t*>(L), weight);
    search_max = scale * p.max_q;
    if (search_max <= 0) return false;
  } else {
    scale = max / static_cast<float>(2 * p.max_q - 1);
  }
  search_scale(s, p, search_max, xval, weight, waux, L, scale);
  unsign_scale(scale, signs, p.n / 8);
  for (int k = 0; k < p.n / p.group; ++k) entries[k] = final_entry(s, L + p.group * k, format);
  return true;
}

float odd_scale_codes(float max_scale, const float* scales, uint32_t* words, int stride) {
  const float d = max_scale / 31;
  const float id = 1 / d;
  for (int ib = 0; ib < 8; ++ib) words[stride * ib] |= static_cast<uint32_t>(odd_level(scales[ib], id, 15)) << 28;
  return d;
}

void require_importance(const float* importance, const char* format) {
  if (importance == nullptr)
    throw Error(ErrorKind::invalid_input, std::string(format) +
                                              " needs an importance matrix: make one with llama-imatrix and pass it "
                                              "(--imatrix FILE)");
}

void unsign_scale(float& scale, uint8_t* signs, int n) {
  if (!(scale < 0)) return;
  scale = -scale;
  for (int k = 0; k < n; ++k) signs[k] = static_cast<uint8_t>(~signs[k] & 127);
}

int final_entry(const GridSearch& s, const int8_t* L, const char* format) {
  const int e = s.on_grid(grid_key(s, L));
  if (e < 0) throw Error(ErrorKind::internal, std::string(format) + " quantizer: a group ended off the grid");
  return e;
}

float iq1_snap(const GridSearch& s, int n_groups, const float* xb, const float* weight, float scale,
               const float* const* xg, int8_t* L, int* index) {
  bool all_on_grid = true;
  for (int k = 0; k < n_groups; ++k) {
    const uint16_t u = grid_key(L + 8 * k);
    index[k] = s.on_grid(u);
    if (index[k] < 0) {
      all_on_grid = false;
      index[k] = best_neighbour(s, u, xb + 8 * k, weight + 8 * k, scale, xg[k], L + 8 * k);
    }
  }
  if (all_on_grid) return scale;
  float sumqx = 0, sumq2 = 0;
  for (int k = 0; k < n_groups; ++k)
    for (int j = 0; j < 8; ++j) {
      const float w = weight[8 * k + j];
      const float q = xg[k][grid_level(s, index[k], j)];
      sumqx += w * q * xb[8 * k + j];
      sumq2 += w * q * q;
    }
  return sumqx > 0 && sumq2 > 0 ? sumqx / sumq2 : scale;
}

}  // namespace ns::kernels::iq
