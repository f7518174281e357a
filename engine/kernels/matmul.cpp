// matmul: convert the activations once, then hand the row chunks out to the
// threads one at a time; a chunk is multiplied with every token before the
// next chunk is touched, so each weight byte comes from memory once per call.
// matmul_group does the same for several products in one hand-out: one
// parallel call, one list of chunks.
#include <algorithm>
#include <array>
#include <numeric>
#include <string>

#include "engine/kernels/format.h"
#include "common/error.h"
#include "engine/util/thread_pool.h"

namespace ns::kernels {
namespace {

// Weight bytes per chunk: small enough to stay in L1/L2 while all tokens pass.
constexpr size_t kChunkBytes = 32 * 1024;
// One token's product reuses no weight byte: it streams them, bound by memory
// bandwidth, and a long run per thread keeps the hardware prefetchers' streams
// going. Measured on 6 experts' gate, up and down (Q4_0_R16, 1408 x 2048) of a
// 1.5 GiB set, 2 threads, configurations interleaved in one process: 32 KiB
// chunks, >= 8 a thread: 27.5 / 22.8 GB/s; 256 KiB, >= 2 a thread: 32.6 /
// 27.9; 1-4 MiB, 1-2 a thread: 27.7-33.2. The floor of 2 chunks a thread still
// lets a thread that runs late take fewer of them.
constexpr size_t kStreamChunkBytes = 256 * 1024;
constexpr int64_t kStreamChunksPerThread = 2;
constexpr int64_t kChunksPerThread = 8;
// Chunk heights are multiples of this: the micro-tiles are 2, 3 or 4 rows high.
constexpr int64_t kRowQuantum = 12;
// Below this many activation elements, converting on one thread beats waking the pool.
constexpr int64_t kParallelConvertElems = 1 << 16;
// Below this many weight bytes x tokens (~5-10 us of the one-token kernels) a
// group runs on the calling thread alone: waking a blocked worker costs more
// (a futex wake and, on a VM, an IPI: tens of microseconds).
constexpr size_t kParallelWorkBytes = 64 * 1024;

// Tasks per parallel call of matmul_group (more are run in several calls).
constexpr size_t kMaxGroupTasks = 64;

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// One conversion of a task's activations into scratch (offset bytes in).
struct ConvertJob {
  RowFromFloatFn convert;
  const float* x;
  int64_t cols;
  int64_t n_tokens;
  GgmlType type;
  size_t offset;
  size_t dst_stride;
  bool same_input(const ConvertJob& o) const {
    return x == o.x && cols == o.cols && n_tokens == o.n_tokens && type == o.type;
  }
  void run(uint8_t* base, int64_t t_begin, int64_t t_end) const {
    for (int64_t t = t_begin; t < t_end; ++t) convert(x + t * cols, base + offset + t * dst_stride, cols);
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

namespace {

// Checks task t's shape and fills its product job (x still unset, see
// matmul_group); false when the task has nothing to compute.
bool plan_task(const MatmulTask& t, Isa isa, int64_t threads, bool per_token, ProductJob& job, ConvertJob& conv) {
  const MatrixView& w = t.w;
  if (t.n_tokens <= 0 || w.rows <= 0) return false;
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
    std::fill(t.y, t.y + t.n_tokens * w.rows, 0.0f);
    return false;
  }
  const IsaKernels k = kernels_for(f, isa);

  // Activations in the vec-dot format (F32 weights use x as it is).
  conv = ConvertJob{nullptr, t.x, w.cols, t.n_tokens, act.type, 0, static_cast<size_t>(w.cols) * sizeof(float)};
  if (act.type != GgmlType::F32) {
    conv.convert = kernels_for(act, isa).quantize;
    conv.dst_stride = gguf::row_bytes(gguf::traits(act.type), static_cast<uint64_t>(w.cols));
  }

  // Rows in chunks. Chunks are a multiple of kRowQuantum rows so micro-tiles
  // of 2, 3 or 4 rows fit them exactly, and there are at least ~8 per thread
  // (one token: 2, kStreamChunkBytes) so that small matrices still split evenly.
  // An interleaved layout's tiles start at whole groups of rows.
  const int64_t quantum = std::lcm(kRowQuantum, f.row_group);
  const bool stream = t.n_tokens == 1;
  const size_t chunk_bytes = stream ? kStreamChunkBytes : kChunkBytes;
  const int64_t per_thread = stream ? kStreamChunksPerThread : kChunksPerThread;
  int64_t chunk_rows = std::max<int64_t>(quantum, static_cast<int64_t>(chunk_bytes / row_bytes) / quantum * quantum);
  chunk_rows = std::min(
      chunk_rows,
      std::max<int64_t>(quantum, round_up((w.rows + per_thread * threads - 1) / (per_thread * threads), quantum)));
  // F16 follows llama.cpp's summation order (see f16_avx2.cpp): its batched
  // path (llamafile tinyBLAS) declines rows % 4 or cols % 8, and ggml then
  // runs ggml_vec_dot_f16 per token, which is our one-token kernel.
  const bool token_by_token =
      w.type == GgmlType::F16 && t.n_tokens > 1 && (per_token || w.rows % 4 != 0 || w.cols % 8 != 0);
  job = ProductJob{k.tile,
                   k.vec_dot,
                   static_cast<const uint8_t*>(w.data),
                   w.row_stride,
                   w.rows,
                   w.cols,
                   reinterpret_cast<const uint8_t*>(t.x),
                   conv.dst_stride,
                   t.n_tokens,
                   t.y,
                   chunk_rows,
                   token_by_token};
  return true;
}

void run_group(const MatmulTask* tasks, size_t n_tasks, ThreadPool& pool, MatmulScratch& scratch, bool per_token) {
  const Isa isa = active_isa();
  std::array<ProductJob, kMaxGroupTasks> jobs;
  std::array<ConvertJob, kMaxGroupTasks> convs;   // convs[j]: the conversion jobs[j] reads
  std::array<int64_t, kMaxGroupTasks> chunk_end;  // chunks of jobs [0, j] together
  std::array<bool, kMaxGroupTasks> shared{};      // jobs[j] reads jobs[j - 1]'s conversion
  size_t n = 0, need = 0, work = 0;
  int64_t n_chunks = 0;
  for (size_t i = 0; i < n_tasks; ++i) {
    if (!plan_task(tasks[i], isa, pool.size(), per_token, jobs[n], convs[n])) continue;
    ConvertJob& c = convs[n];
    if (c.convert != nullptr) {
      shared[n] = n > 0 && c.same_input(convs[n - 1]);
      c.offset = shared[n] ? convs[n - 1].offset : need;
      if (!shared[n]) need += c.dst_stride * static_cast<size_t>(c.n_tokens);
    }
    n_chunks += (jobs[n].rows + jobs[n].chunk_rows - 1) / jobs[n].chunk_rows;
    work += static_cast<size_t>(jobs[n].rows) * jobs[n].w_stride * static_cast<size_t>(jobs[n].n_tokens);
    chunk_end[n++] = n_chunks;
  }
  if (n == 0) return;
  if (scratch.act.size() < need) scratch.act.resize(need);
  uint8_t* act = scratch.act.data();
  for (size_t j = 0; j < n; ++j) {
    const ConvertJob& c = convs[j];
    if (c.convert == nullptr) continue;
    jobs[j].x = act + c.offset;
    if (shared[j]) continue;
    if (c.n_tokens > 1 && pool.size() > 1 && c.n_tokens * c.cols >= kParallelConvertElems) {
      pool.parallel_for(c.n_tokens, [&c, act](int, int64_t b, int64_t e) { c.run(act, b, e); });
    } else {
      c.run(act, 0, c.n_tokens);
    }
  }
  // Chunks go to whichever thread is free (the machine may be shared: a
  // static split waits for the slowest thread at every call).
  pool.parallel_chunks(
      n_chunks,
      [&jobs, &chunk_end, n](int, int64_t c) {
    const size_t j =
        static_cast<size_t>(std::upper_bound(chunk_end.begin(), chunk_end.begin() + n, c) - chunk_end.begin());
    const int64_t first = j == 0 ? 0 : chunk_end[j - 1];
    jobs[j].run(c - first, c - first + 1);
      },
      work >= kParallelWorkBytes);
}

}  // namespace

void matmul_group(const MatmulTask* tasks, size_t n_tasks, ThreadPool& pool, MatmulScratch& scratch, bool per_token) {
  for (size_t first = 0; first < n_tasks; first += kMaxGroupTasks)
    run_group(tasks + first, std::min(kMaxGroupTasks, n_tasks - first), pool, scratch, per_token);
}

void matmul(const MatrixView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool, MatmulScratch& scratch,
            bool per_token) {
  const MatmulTask task{w, x, n_tokens, y};
  matmul_group(&task, 1, pool, scratch, per_token);
}

}  // namespace ns::kernels
