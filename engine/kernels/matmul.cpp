// matmul: convert the activations once, then hand the row chunks out to the
// threads one at a time; a chunk is multiplied with every token before the
// next chunk is touched, so each weight byte comes from memory once per call.
#include <algorithm>
#include <string>

#include "engine/kernels/format.h"
#include "common/error.h"
#include "engine/util/thread_pool.h"

namespace ns::kernels {
namespace {

// Weight bytes per chunk: small enough to stay in L1/L2 while all tokens pass.
constexpr size_t kChunkBytes = 32 * 1024;
// Chunk heights are multiples of this: the micro-tiles are 2, 3 or 4 rows high.
constexpr int64_t kRowQuantum = 12;
// Below this many activation elements, converting on one thread beats waking the pool.
constexpr int64_t kParallelConvertElems = 1 << 16;

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

struct ConvertJob {
  RowFromFloatFn convert;
  const float* x;
  int64_t cols;
  uint8_t* dst;
  size_t dst_stride;
  void run(int64_t t_begin, int64_t t_end) const {
    for (int64_t t = t_begin; t < t_end; ++t) convert(x + t * cols, dst + t * dst_stride, cols);
  }
};

struct ProductJob {
  TileFn tile;  // null: loop over dot
  VecDotFn dot;
  const uint8_t* w;
  size_t w_stride;
  int64_t rows, cols;
  const uint8_t* x;
  size_t x_stride;
  int64_t n_tokens;
  float* y;
  int64_t chunk_rows;
  bool token_by_token;  // one-token tiles, each token on its own

  void run(int64_t chunk_begin, int64_t chunk_end) const {
    const int64_t end = std::min(rows, chunk_end * chunk_rows);
    for (int64_t r0 = chunk_begin * chunk_rows; r0 < end; r0 += chunk_rows) {
      const int64_t nr = std::min(chunk_rows, end - r0);
      if (tile != nullptr && token_by_token) {
        for (int64_t t = 0; t < n_tokens; ++t)
          tile(Tile{w + r0 * w_stride, w_stride, nr, x + t * x_stride, x_stride, 1, cols, y + t * rows + r0, rows});
        continue;
      }
      if (tile != nullptr) {
        tile(Tile{w + r0 * w_stride, w_stride, nr, x, x_stride, n_tokens, cols, y + r0, rows});
        continue;
      }
      for (int64_t r = r0; r < r0 + nr; ++r)
        for (int64_t t = 0; t < n_tokens; ++t) y[t * rows + r] = dot(w + r * w_stride, x + t * x_stride, cols);
    }
  }
};

}  // namespace

void matmul(const MatrixView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool, MatmulScratch& scratch,
            bool per_token) {
  if (n_tokens <= 0 || w.rows <= 0) return;
  const FormatKernels& f = require_format(w.type, "matmul");
  const FormatKernels& act = *find_format(f.vec_dot_type);
  require_whole_blocks(w.type, w.cols, "matmul");
  require_whole_blocks(act.type, w.cols, "matmul");
  const size_t row_bytes = gguf::row_bytes(gguf::traits(w.type), static_cast<uint64_t>(w.cols));
  if (w.row_stride < row_bytes) {
    throw Error(ErrorKind::bad_model, "matmul: row stride " + std::to_string(w.row_stride) + " is below the " +
                                          std::to_string(row_bytes) + " bytes of a " +
                                          std::string(gguf::type_name(w.type)) + " row of " + std::to_string(w.cols) +
                                          " elements; the tensor view is wrong");
  }
  if (w.cols == 0) {  // empty rows: every dot product is 0
    std::fill(y, y + n_tokens * w.rows, 0.0f);
    return;
  }
  const Isa isa = active_isa();
  const IsaKernels k = kernels_for(f, isa);

  // 1. Activations in the vec-dot format (F32 weights use x as it is).
  const uint8_t* xa = reinterpret_cast<const uint8_t*>(x);
  size_t x_stride = static_cast<size_t>(w.cols) * sizeof(float);
  if (act.type != GgmlType::F32) {
    x_stride = gguf::row_bytes(gguf::traits(act.type), static_cast<uint64_t>(w.cols));
    const size_t need = x_stride * static_cast<size_t>(n_tokens);
    if (scratch.act.size() < need) scratch.act.resize(need);
    const ConvertJob convert{kernels_for(act, isa).quantize, x, w.cols, scratch.act.data(), x_stride};
    if (n_tokens > 1 && pool.size() > 1 && n_tokens * w.cols >= kParallelConvertElems) {
      pool.parallel_for(n_tokens, [&convert](int, int64_t b, int64_t e) { convert.run(b, e); });
    } else {
      convert.run(0, n_tokens);
    }
    xa = scratch.act.data();
  }

  // 2. Rows in chunks, a contiguous range of chunks per thread. Chunks are a
  // multiple of kRowQuantum rows so micro-tiles of 2, 3 or 4 rows fit them
  // exactly, and there are at least ~8 per thread so that small matrices still
  // split evenly.
  const int64_t threads = pool.size();
  int64_t chunk_rows =
      std::max<int64_t>(kRowQuantum, static_cast<int64_t>(kChunkBytes / row_bytes) / kRowQuantum * kRowQuantum);
  chunk_rows = std::min(
      chunk_rows, std::max<int64_t>(kRowQuantum, round_up((w.rows + 8 * threads - 1) / (8 * threads), kRowQuantum)));
  // F16 follows llama.cpp's summation order (see f16_avx2.cpp): its batched
  // path (llamafile tinyBLAS) declines rows % 4 or cols % 8, and ggml then
  // runs ggml_vec_dot_f16 per token, which is our one-token kernel.
  const bool token_by_token =
      w.type == GgmlType::F16 && n_tokens > 1 && (per_token || w.rows % 4 != 0 || w.cols % 8 != 0);
  const ProductJob job{k.tile,
                       k.vec_dot,
                       static_cast<const uint8_t*>(w.data),
                       w.row_stride,
                       w.rows,
                       w.cols,
                       xa,
                       x_stride,
                       n_tokens,
                       y,
                       chunk_rows,
                       token_by_token};
  // Chunks go to whichever thread is free (the machine may be shared: a
  // static split waits for the slowest thread at every call).
  const int64_t n_chunks = (w.rows + chunk_rows - 1) / chunk_rows;
  pool.parallel_chunks(n_chunks, [&job](int, int64_t c) { job.run(c, c + 1); });
}

}  // namespace ns::kernels
