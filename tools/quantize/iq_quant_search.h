// What the importance-weighted i-quant quantizers share (ggml-quants.c's
// iq2xs_init_impl, make_qp_quants and the weight formula): the search
// structure over a format's grid, the weighted fit of small non-negative
// levels, and how a column's importance turns into a per-element weight.
// Scalar only, for the quantizers in iq*_quantize.cpp. Results follow ggml's
// float arithmetic in ggml's operand order (this code is built without -mfma,
// as ggml-quants.c is) so that a file we write holds the bytes
// llama-quantize writes from the same floats and importance matrix
// (tests/conformance/reference/make_lowbit_goldens.sh checks it per tensor).
//
// The grids the searches use are the dequantization grids of iq_tables.h in
// another coordinate: a group of 8 elements is 8 levels l in 0..2 (ggml
// writes 2l + 1), its key u = sum l_j << 2j. For IQ2_XXS / IQ2_XS the levels
// are the magnitudes 0x08, 0x19, 0x2b; for IQ1_S / IQ1_M the values -1, 0, 1.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/kernels/iquant.h"

namespace ns::kernels::iq {

// The grids with a search structure (ggml's iq2_data slots).
enum class SearchGrid { iq2xxs, iq2xs, iq1s, iq3xxs };

// For one grid: `level[g]` the 8 levels of grid entry g (byte j = 2 l_j + 1,
// as ggml keeps them), `on_grid(u)` the entry whose levels are u or -1, and
// for a key u off the grid the neighbours worth trying: every entry within
// the `nwant` smallest distinct squared distances (in 2l + 1 units) from u,
// nearest first, ties by entry index (ggml's qsort order). ggml's nwant: 2
// for IQ2_XXS / IQ2_XS, 3 for IQ1_S / IQ1_M. Built once, on first use
// (thread-safe); only keys with every level <= 2 have neighbour lists, the
// only ones the quantizers look up.
// IQ3_XXS's grid is of groups of 4 with levels 0..7 (3 bits each, ggml's
// iq3xs_init_impl, magnitudes 0x04 + 8l but 0x3e for 7): `group` and `bits`
// say which; its keys are sum l_j << 3j and every key has a list (nwant 2).
struct GridSearch {
  int group = 8, bits = 2;
  std::vector<uint64_t> level;
  std::vector<int32_t> map;     // u -> entry (>= 0) or -1 - offset into `lists`
  std::vector<uint16_t> lists;  // at an offset: the count, then the entries
  int on_grid(uint16_t u) const { return map[u] >= 0 ? map[u] : -1; }
  // The neighbour list of an off-grid key: count, then entries.
  const uint16_t* neighbours(uint16_t u) const { return lists.data() + (-1 - map[u]); }
};
const GridSearch& grid_search(SearchGrid g);

// Key of 8 levels (0..2) L[0..7] (the 2-bit grids).
static inline uint16_t grid_key(const int8_t* L) {
  uint16_t u = 0;
  for (int j = 0; j < 8; ++j) u = static_cast<uint16_t>(u | (L[j] << (2 * j)));
  return u;
}
// Key of a group of levels on grid s.
static inline uint16_t grid_key(const GridSearch& s, const int8_t* L) {
  uint16_t u = 0;
  for (int j = 0; j < s.group; ++j) u = static_cast<uint16_t>(u | (L[j] << (s.bits * j)));
  return u;
}

// Level j (0..2) of grid entry g.
static inline int grid_level(const GridSearch& s, int g, int j) {
  return ((static_cast<int>((s.level[static_cast<size_t>(g)] >> (8 * j)) & 0xff)) - 1) / 2;
}

// ggml's make_qp_quants: levels L in [0, nmax] for non-negative x with
// weights w, the scale from 9 candidates around nmax / max and 5 rounds of
// one-element refinement. Returns the weighted least-squares scale (0 for an
// all-zero group).
float make_qp_quants(int n, int nmax, const float* x, uint8_t* L, const float* w);

// The per-element weights of a group: importance[i] * sqrt(sigma2 + x[i]^2)
// (ggml's formula; sigma2 is a per-super-block mean of x^2, scaled by the format).
void importance_weights(int n, const float* importance, const float* x, float sigma2, float* weight);

// The sum of x[i]^2 over a super-block of 256, in order.
float sum_squares(const float* x, int n);

// The super-block loop of the i-quant quantizers: block b (the 256 values
// x = src + 256 b and their importance, null where there is none) into the
// `bytes` bytes at blk, zeroed first, by quantize_block(blk, x, importance,
// sigma2) with sigma2 = sigma2_scale * sum(x^2) / 256 (ggml's weight spread:
// 1 for IQ2_XXS / IQ2_XS, 2 for IQ1_S / IQ1_M / IQ3_XXS).
template <class Fn>
void for_each_super_block(const float* src, void* dst, int64_t n, const float* importance, size_t bytes,
                          float sigma2_scale, Fn&& quantize_block) {
  auto* blk = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kElems; ++b, blk += bytes) {
    std::memset(blk, 0, bytes);
    const float* x = src + kElems * b;
    const float sigma2 = sigma2_scale * sum_squares(x, kElems) / static_cast<float>(kElems);
    quantize_block(blk, x, importance ? importance + kElems * b : nullptr, sigma2);
  }
}

// IQ1_S / IQ1_M: the element indices of x[0..n) (n <= 32) in ascending order
// of value, through qsort over (value, index) pairs as ggml sorts them (so
// ties come out as the C library orders them there too).
void sorted_order(const float* x, int n, int* order);

// ggml's iq2_find_best_neighbour / iq1_find_best_neighbour2: for an off-grid
// key u, the listed entry whose values xg[level] times scale are nearest to
// xval under the weights (the first on ties); writes its levels to L. xg:
// 1, 3, 5 for the IQ2 grids, the shifted -1, 0, 1 for IQ1_S / IQ1_M.
int best_neighbour(const GridSearch& s, uint16_t u, const float* xval, const float* weight, float scale,
                   const float* xg, int8_t* L);

// IQ2_XXS / IQ2_XS (magnitudes 2l + 1 with l in 0..2, signs apart):
// fold_signs: the magnitudes of a group of 8 into xval and its sign bits; an
// odd count of minus signs flips the element of least weight * x^2 back (the
// format stores 7 sign bits, the 8th makes the count even). Returns the 7 bits.
uint8_t fold_signs(const float* xb, const float* weight, float* xval);
// fold_block: a block of n (a multiple of 8) elements: its weights from the
// importance (x^2 where it is null), their square roots waux (the neighbour search's weights), the
// folded magnitudes and each group's sign bits; returns the largest magnitude.
float fold_block(int n, const float* xb, const float* importance, float sigma2, float* weight, float* waux, float* xval,
                 uint8_t* signs);
// odd_level: the nearest 2l + 1 to id * x, l clamped to 0..nmax (ggml's
// rounding of levels and of 4-bit sub-block scales against d / 2).
// odd_levels: odd_level for a group of 8, l clamped to 0..2.
int odd_level(float x, float id, int nmax);
void odd_levels(const float* xval, float id, int8_t* L);
// snap_odd: the grid entry of levels L, snapping them to the nearest listed
// neighbour (under weights waux and scale) when off the grid.
int snap_odd(const GridSearch& s, int8_t* L, const float* xval, const float* waux, float scale);
// odd_fit: the weighted least-squares sums of xval against 2L + 1 over n elements.
void odd_fit(int n, const float* xval, const float* weight, const int8_t* L, float& sumqx, float& sumq2);
// refit_scale: the least-squares scale of the final levels L (odd_fit),
// replacing scale unless sumq2 is 0.
void refit_scale(int n, const float* xval, const float* weight, const int8_t* L, float& scale);
// take_better_fit: odd_fit of the candidate levels Laux and, when its scale
// beats the best so far (sumqx^2 / sumq2 > best), takes it: scale, best =
// scale * sumqx and L = Laux. Returns whether it did.
bool take_better_fit(int n, const float* xval, const float* weight, const int8_t* Laux, float& scale, float& best,
                     int8_t* L);
// IQ2_XXS / IQ2_XS / IQ3_XXS: ggml's scale search over a block of n folded
// magnitudes xval, in groups of `group`. Every trial id = (2 max_q - 1 +
// is * step) / max, is in -steps..steps, fits each group's levels
// (levels(xval, id, L)) and snaps them to the grid (snap(s, L, xval, waux,
// 1 / id)); take_better_fit keeps the best in L and scale (which come in as
// the fit to beat). Then the groups the best fit left off the grid (every
// group unless track_on_grid, IQ2_XXS) are fitted and snapped again under
// its scale, and the scale refit (refit_scale), unless it is not positive.
struct ScaleSearch {
  int n, group, max_q, steps;
  float step;
  bool track_on_grid;
  float group_max_eps;  // fit_sub_block: a block whose largest magnitude is below it stays zero
  bool qp_start;        // fit_sub_block: search around make_qp_quants's fit (IQ2_XXS), else max / (2 max_q - 1)
  void (*levels)(const float* xval, float id, int8_t* L);
  int (*snap)(const GridSearch& s, int8_t* L, const float* xval, const float* waux, float scale);
};
void search_scale(const GridSearch& s, const ScaleSearch& p, float max, const float* xval, const float* weight,
                  const float* waux, int8_t* L, float& scale);
// IQ2_XXS / IQ2_XS / IQ3_XXS: one block of p.n values xb with its importance
// (or null): signs folded (fold_block), the scale searched (search_scale)
// from the start p.qp_start names and made positive (unsign_scale), and each
// group's grid entry (final_entry, naming `format`) into entries, its 7 sign
// bits into signs (one per 8 values). Returns false, with scale and entries
// unset, for a block below p.group_max_eps or a non-positive qp_start fit.
bool fit_sub_block(const GridSearch& s, const ScaleSearch& p, const float* xb, const float* importance, float sigma2,
                   const char* format, float& scale, int* entries, uint8_t* signs);
// fit_sub_block over the 256 / p.n blocks of a super-block (x, importance or
// null, sigma2): scales[ib] the fitted scale (0 where it fits none), and
// store(ib, entries, signs) for each fitted block. Returns the largest scale.
template <class Store>
float fit_sub_blocks(const GridSearch& s, const ScaleSearch& p, const float* x, const float* importance, float sigma2,
                     const char* format, float* scales, Store&& store) {
  float max_scale = 0;
  for (int ib = 0; ib < kElems / p.n; ++ib) {
    float scale;
    int entries[8];
    uint8_t signs[4];
    scales[ib] = 0;
    const float* w = importance ? importance + p.n * ib : nullptr;
    if (!fit_sub_block(s, p, x + p.n * ib, w, sigma2, format, scale, entries, signs)) continue;
    store(ib, entries, signs);
    scales[ib] = scale;
    max_scale = std::max(max_scale, scale);
  }
  return max_scale;
}
// IQ2_XXS / IQ3_XXS: the super-block scale d = max_scale / 31 (returned) and
// the 4-bit code odd_level(scale, 1 / d, 15) of each of the 8 sub-block scales
// in bits 28..31 of its word, words[stride * ib].
float odd_scale_codes(float max_scale, const float* scales, uint32_t* words, int stride);
// The importance-required quantizers' check: throws ns::Error (invalid_input)
// naming the format and the fix when importance is null.
void require_importance(const float* importance, const char* format);

// IQ2_XXS / IQ2_XS / IQ3_XXS: ggml's guard for a negative fitted scale (the
// format stores it unsigned): make it positive and flip the n groups' signs.
void unsign_scale(float& scale, uint8_t* signs, int n);
// The grid entry of a group's final levels; throws ns::Error (internal), naming
// `format`, if they are off the grid (the search always snaps them onto it).
int final_entry(const GridSearch& s, const int8_t* L, const char* format);

// IQ1_S / IQ1_M: the values of levels 0..2 with a positive or a negative shift.
inline constexpr float kIq1Plus[3] = {-1 + kIq1Delta, kIq1Delta, 1 + kIq1Delta};
inline constexpr float kIq1Minus[3] = {-1 - kIq1Delta, -kIq1Delta, 1 - kIq1Delta};

// IQ1_S / IQ1_M: snaps groups k < n_groups of the levels L (8 each) to the
// grid, group k valued by xg[k] (its shifted -1, 0, 1), writing the entries to
// index; when any group was off the grid, refits the scale to the snapped
// values (kept only if positive, as ggml does). Returns the scale.
float iq1_snap(const GridSearch& s, int n_groups, const float* xb, const float* weight, float scale,
               const float* const* xg, int8_t* L, int* index);

}  // namespace ns::kernels::iq
