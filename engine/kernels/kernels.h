// Weight kernels: dequantize, quantize (reference), dot products and the
// matrix-times-activations product the forward pass is built on.
//
// Every weight type has a scalar reference (<format>.cpp) and, where the CPU
// has it, an AVX2 version (<format>_avx2.cpp, compiled with -mavx2 -mfma -mf16c)
// and for the hot formats an AVX-512 + VNNI version (<format>_avx512.cpp,
// compiled with -mavx512{f,bw,vl,dq,vnni} as well), chosen at run time through
// the table in dispatch.cpp. Each family has one tile loop and a block decoder
// per format: the K-quants (kquant_avx2.h), the 32-element block formats
// (block32_avx2.h, int8_avx512.h; scalar: block32.h), the i-quants
// (iquant_avx2.h), the formats whose blocks span several Q8_0 blocks
// (avx2::StepMicro). Tests compare each with the scalar reference on random
// and edge-case blocks.
//
// As in the reference implementation, activations are converted to the
// weight type's "vec-dot type" before the dot product: Q8_0 for Q4_0/Q8_0 (integer
// dot products), Q8_K for the K-quants, i-quants and ternary types, F16 for F16,
// BF16 for BF16, F32 for F32.
//
// Thread-safety: everything here is reentrant except set_isa (a global switch
// for tests and benchmarks) and a MatmulScratch, which belongs to one caller.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/gguf/ggml_type.h"

namespace ns {
class ThreadPool;
}

namespace ns::kernels {

using gguf::GgmlType;

// A 2-D weight: `rows` output features, each a row of `cols` input features
// stored contiguously in `type`'s block format, rows `row_stride` bytes apart.
struct MatrixView {
  GgmlType type = GgmlType::F32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  size_t row_stride = 0;
};

bool is_supported(GgmlType t);  // this build can compute with t
GgmlType vec_dot_type(GgmlType weight_type);

// Reference conversions (scalar, exact definitions of the formats). n must be a
// multiple of the block size. Throw ns::Error for types without kernels;
// quantize_row also for the read-only weight types (the i-quants: IQ2_S and
// IQ3_S have no quantizer, the others only tools/quantize's weighted ones), which
// this build computes with but cannot produce that way.
void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n);
void quantize_row(GgmlType t, const float* src, void* dst, int64_t n);

// The importance-weighted quantizers (IQ2_XXS .. IQ4_XS with an importance
// matrix) are the generator's: tools/quantize/quantize_weighted.h.

// Ordered: each level includes the one before it. avx512 means AVX-512
// F/BW/VL/DQ with VNNI (Ice Lake, Zen 4 and later), on top of avx2 (AVX2, FMA,
// F16C); a format without AVX-512 kernels runs its AVX2 ones under it, and
// every AVX-512 path converts activations with the AVX2 quantizer, so the two
// paths see the same activation bytes. Code with only an AVX2 version tests
// isa >= Isa::avx2.
enum class Isa { scalar, avx2, avx512 };
Isa detected_isa();     // best the CPU supports
Isa active_isa();       // what matmul uses now
void set_isa(Isa isa);  // tests and benchmarks: force a path (clamped to detected)
const char* isa_name(Isa isa);
// The cpu_features setting (config key, --cpu-features): "auto" selects the
// detected ISA (nullopt here); "scalar", "avx2" or "avx512" force that path.
// Throws ns::Error (invalid_input) for another name, or when the CPU lacks the
// forced path, naming what this CPU has. parse checks; set also applies it.
std::optional<Isa> parse_cpu_features(std::string_view cpu_features);
void set_isa_override(std::string_view cpu_features);
// What the CPU offers, for messages: e.g. "avx2 fma f16c avx512f avx512bw ...".
std::string cpu_feature_summary();

// Dot product of one weight row (type t, n elements) with one activation row
// already converted to vec_dot_type(t).
// Q8_0 activations must lie in [-127, 127], as every quantizer here produces.
using VecDotFn = float (*)(const void* w, const void* x, int64_t n);
VecDotFn vec_dot(GgmlType t, Isa isa);  // isa is clamped to detected_isa()

// y[r] = vec_dot(t, isa)(w + r * w_stride, x, n) for r < rows, bit for bit,
// through the format's tile kernel where it has one: for small matrices (MLA's
// per-head k_b and v_b, 128-512 rows of 128-512 elements) one call instead of
// one per row, and the tile's rows share each activation block's loads.
// (Block formats only: F32/F16/BF16 tiles sum in llama.cpp's batched order,
// so those loop over vec_dot.) t must be a plain (not interleaved) layout.
void rows_dot(GgmlType t, Isa isa, const void* w, size_t w_stride, int64_t rows, const void* x, int64_t n, float* y);

// Converts one activation row of n floats to vec_dot_type(weight_type) exactly
// as matmul does under `isa` (dst holds row_bytes(vec_dot_type, n) bytes). The
// scalar Q8_0 path is ggml's reference quantizer (round half away from zero);
// the AVX2 one rounds like ggml's x86 quantizer (half to even), which can move
// a value that sits on a rounding boundary by one quantum.
void convert_activations(GgmlType weight_type, Isa isa, const float* src, void* dst, int64_t n);

// Scratch reused across calls so the token loop does not allocate once warm.
struct MatmulScratch {
  std::vector<uint8_t> act;  // activations converted to vec_dot_type
};

// y[t * w.rows + r] = dot(w row r, x[t * w.cols ...]) for t in [0, n_tokens).
// Work is split over `pool`'s threads by rows; x and y are F32, row-major.
// Each weight row is read once per call whatever n_tokens is. Throws ns::Error
// (bad_model) for a type without kernels or a shape the type cannot hold.
// per_token: sum each token's dot products as a single-token call would (the
// order the reference uses for expert matmuls, mul_mat_id), not in batch tiles.
void matmul(const MatrixView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool, MatmulScratch& scratch,
            bool per_token = false);

// One product of a matmul_group: y = w x, as matmul(w, x, n_tokens, y).
struct MatmulTask {
  MatrixView w;
  const float* x = nullptr;
  int64_t n_tokens = 0;
  float* y = nullptr;
};

// Several independent products in one call, each computed exactly as matmul
// computes it (the same bits): their row chunks go to the threads as one list,
// so the pool wakes once for all of them and no thread waits at a barrier
// between them (a one-token product of an expert takes about as long as a
// wake-up). A task whose x, n_tokens, cols and activation format are those of
// the task before it shares that task's converted activations (an FFN's gate
// and up). No task's y may overlap another's x or y.
void matmul_group(const MatmulTask* tasks, size_t n_tasks, ThreadPool& pool, MatmulScratch& scratch,
                  bool per_token = false);

// In-memory interleaved layouts (q4_0_r16.h), made when weights land (an
// expert in the expert cache): the same bytes, rows permuted so that matmul's
// tiles read a group of rows as one stream and decode each block once for the
// group. repacked_type: the layout `rows` rows of t go to, or t when there is
// none (Q4_0 with at least 16 rows -> Q4_0_R16). repack_rows rewrites `rows`
// contiguous rows of t (row_bytes apart, `cols` elements) at data in place
// into it; unpack_rows undoes it. Both are no-ops where repacked_type(t, rows)
// == t; matmul on the result gives the scalar reference's bits on every path.
GgmlType repacked_type(GgmlType t, int64_t rows);
void repack_rows(GgmlType t, void* data, int64_t rows, int64_t cols);
void unpack_rows(GgmlType t, void* data, int64_t rows, int64_t cols);

// fp16 / bf16 scalar conversions (exact, round-to-nearest-even on the way down).
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);

}  // namespace ns::kernels
