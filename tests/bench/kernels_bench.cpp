// Kernel benchmark: a 4096 x 4096 matmul per weight type at 1, 16 and 64
// tokens, timed side by side for the paths the CPU has, on the same pool:
//   scalar    matmul with the scalar reference kernels (set_isa(scalar))
//   avx2      matmul with the AVX2 kernels
//   avx512    matmul with the AVX-512 + VNNI kernels (the AVX2 ones for a
//             format without them)
//   rp-*      the same ISA paths on the weights repacked into their
//             interleaved in-memory layout (Q4_0: Q4_0_R16, kernels.h)
//   deq+dot   the plain path: dequantize each weight row to floats with the
//             reference dequantizer, then a plain float loop per token
//   deq+simd  the same with the AVX2 F32 dot: what working in the quantized
//             domain gains beyond SIMD alone
// and printed as GFLOP/s, GB/s of weight bytes and ratios (these machines are
// noisy; ratios measured in one run are the figures that mean something). The
// time of a path is its fastest call.
//
// usage: ns_bench_kernels [--threads N] [--min-time SECONDS] [--size N] [--type NAME] [--tokens N,N,..]
//                         [--paths NAME,NAME,..] [--hash]
// --paths times only the named paths (e.g. avx2,avx512: a before/after run of
// the SIMD kernels without the slow baselines). --hash times nothing: it
// prints a digest of every output bit of matmul per weight type and ISA path
// (rows of 7 and 33 blocks, 768 and 1280 elements for 256-element blocks; 29
// rows; 1..17 and 64 tokens): a kernel change that keeps the arithmetic keeps
// every line, so the lines before and after it must be the same. Lines
// "ref" digest the reference quantizer's bytes (random ones for the read-only
// formats) and the reference dequantizer's floats, "quant-w" the
// importance-weighted quantizer's bytes, "indexer" the DSA indexer's scores
// (engine/kernels/indexer.h) per path. --indexer times those scores instead.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "engine/kernels/format.h"
#include "engine/kernels/indexer.h"
#include "engine/kernels/iquant.h"
#include "engine/kernels/kernels.h"
#include "engine/util/thread_pool.h"
#include "tools/quantize/quantize_weighted.h"

namespace {

using ns::kernels::GgmlType;
using ns::kernels::Isa;
using Clock = std::chrono::steady_clock;

struct Options {
  int threads = 2;
  double min_time = 0.4;
  int64_t size = 4096;
  std::string only;  // one type name, or all
  std::vector<int64_t> tokens{1, 16, 64};
  std::vector<std::string> paths;  // empty: all
  bool hash = false;
  bool indexer = false;  // --indexer: the DSA indexer's scores instead of matmul
};

std::vector<std::string> split_commas(const char* p) {
  std::vector<std::string> out;
  std::string cur;
  for (; *p != '\0'; ++p) {
    if (*p == ',') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += *p;
    }
  }
  out.push_back(cur);
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) {
      o.threads = std::atoi(argv[++i]);
    } else if (a == "--min-time" && i + 1 < argc) {
      o.min_time = std::atof(argv[++i]);
    } else if (a == "--type" && i + 1 < argc) {
      o.only = argv[++i];
    } else if (a == "--size" && i + 1 < argc) {
      o.size = std::atoll(argv[++i]);
    } else if (a == "--paths" && i + 1 < argc) {
      o.paths = split_commas(argv[++i]);
    } else if (a == "--hash") {
      o.hash = true;
    } else if (a == "--indexer") {
      o.indexer = true;
    } else if (a == "--tokens" && i + 1 < argc) {
      o.tokens.clear();
      for (const char* p = argv[++i]; *p != '\0';) {
        char* end = nullptr;
        o.tokens.push_back(std::strtoll(p, &end, 10));
        if (end == p || o.tokens.back() <= 0) {
          std::fprintf(stderr, "--tokens takes positive counts separated by commas, e.g. 1,16,64\n");
          std::exit(2);
        }
        p = *end == ',' ? end + 1 : end;
      }
    } else {
      std::fprintf(
          stderr,
          "usage: %s [--threads N] [--min-time SECONDS] [--size N (multiple of 256)] [--type NAME, e.g. Q4_K] "
          "[--tokens N,N,.. (default 1,16,64)] [--paths scalar,avx2,avx512,deq+dot,deq+simd] [--hash] [--indexer]\n",
          argv[0]);
      std::exit(a == "--help" ? 0 : 2);
    }
  }
  if (o.size <= 0 || o.size % 256 != 0) {
    std::fprintf(stderr, "--size must be a positive multiple of 256 (the K-quants' block)\n");
    std::exit(2);
  }
  return o;
}

// One way of computing the product, and its fastest call so far.
struct Path {
  const char* name;
  std::function<void(float* y)> run;
  std::vector<float> y;
  double best = 1e30;
};

// Rounds of one call per path, interleaved so that a burst of load from other
// processes hits every path alike; at least 3 rounds and min_time per path.
// A path's time is its fastest call, the figure least disturbed by others.
void measure(std::vector<Path>& paths, double min_time) {
  double total = 0;
  for (auto& p : paths) p.run(p.y.data());  // warm-up
  for (int round = 0; round < 3 || total < min_time * static_cast<double>(paths.size()); ++round) {
    for (auto& p : paths) {
      const auto start = Clock::now();
      p.run(p.y.data());
      const double t = std::chrono::duration<double>(Clock::now() - start).count();
      p.best = std::min(p.best, t);
      total += t;
    }
  }
}

float plain_dot(const void* a, const void* b, int64_t n) {
  const auto* fa = static_cast<const float*>(a);
  const auto* fb = static_cast<const float*>(b);
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += fa[i] * fb[i];
  return s;
}

// The baselines: per row, dequantize once into a per-thread buffer, then dot it with every token.
void dequantize_then_dot(const ns::kernels::MatrixView& w, const float* x, int64_t n_tokens, float* y,
                         ns::ThreadPool& pool, std::vector<std::vector<float>>& rows, ns::kernels::VecDotFn dot) {
  struct Job {
    const ns::kernels::MatrixView* w;
    const float* x;
    int64_t n_tokens;
    float* y;
    std::vector<std::vector<float>>* rows;
    ns::kernels::VecDotFn dot;
  } job{&w, x, n_tokens, y, &rows, dot};
  pool.parallel_for(w.rows, [&job](int thread, int64_t begin, int64_t end) {
    const auto& w = *job.w;
    float* row = (*job.rows)[static_cast<size_t>(thread)].data();
    for (int64_t r = begin; r < end; ++r) {
      ns::kernels::dequantize_row(w.type, static_cast<const uint8_t*>(w.data) + r * w.row_stride, row, w.cols);
      for (int64_t t = 0; t < job.n_tokens; ++t) job.y[t * w.rows + r] = job.dot(row, job.x + t * w.cols, w.cols);
    }
  });
}

double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, static_cast<double>(std::fabs(a[i] - b[i])));
    den = std::max(den, static_cast<double>(std::fabs(b[i])));
  }
  return den > 0 ? num / den : num;
}

constexpr GgmlType kTypes[] = {GgmlType::F32,     GgmlType::F16,   GgmlType::BF16,  GgmlType::Q8_0,   GgmlType::Q4_0,
                               GgmlType::Q4_1,    GgmlType::Q5_0,  GgmlType::Q5_1,  GgmlType::IQ4_NL, GgmlType::MXFP4,
                               GgmlType::Q2_K,    GgmlType::Q3_K,  GgmlType::Q4_K,  GgmlType::Q5_K,   GgmlType::Q6_K,
                               GgmlType::IQ2_XXS, GgmlType::IQ1_S, GgmlType::IQ1_M, GgmlType::IQ4_XS, GgmlType::IQ3_XXS,
                               GgmlType::IQ2_XS,  GgmlType::TQ2_0, GgmlType::TQ1_0, GgmlType::IQ2_S,  GgmlType::IQ3_S,
                               GgmlType::Q1_0,    GgmlType::Q2_0,  GgmlType::NVFP4};

// rows x cols weights of `type` from the floats wf (rows x cols): quantized
// where the type has a quantizer. Read-only formats (the i-quants) have none:
// random bytes are valid blocks once the fp16 super-scale is finite; 2^-9
// keeps the weights near the others' 0.02 scale.
std::vector<uint8_t> make_weights(GgmlType type, int64_t rows, int64_t cols, const std::vector<float>& wf,
                                  std::mt19937& rng) {
  const auto& tt = ns::gguf::traits(type);
  const size_t row_bytes = ns::gguf::row_bytes(tt, static_cast<uint64_t>(cols));
  std::vector<uint8_t> wq(row_bytes * static_cast<size_t>(rows));
  if (ns::kernels::find_format(type)->quantize != nullptr) {
    for (int64_t r = 0; r < rows; ++r)
      ns::kernels::quantize_row(type, wf.data() + r * cols, wq.data() + r * row_bytes, cols);
  } else {
    for (auto& b : wq) b = static_cast<uint8_t>(rng());
    for (size_t b = 0; b < wq.size(); b += tt.block_bytes)
      ns::kernels::iq::set_super_scale(type, wq.data() + b, 0x1800);
  }
  return wq;
}

std::vector<float> normal_floats(size_t n, float sigma, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& f : v) f = normal(rng);
  return v;
}

// FNV-1a, continued from h over n bytes at p.
constexpr uint64_t kFnvBasis = 0xcbf29ce484222325ull;
uint64_t fnv(uint64_t h, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

// --hash: FNV-1a over the bits of every output of matmul, per type and ISA,
// and of the reference conversions.
int print_hashes(const Options& opt) {
  ns::ThreadPool pool(1);
  const int64_t rows = 29;  // no multiple of any micro-tile height
  std::vector<int64_t> token_counts;
  for (int64_t t = 1; t <= 17; ++t) token_counts.push_back(t);
  token_counts.push_back(64);
  std::printf(
      "kernels hash: detected ISA %s; per type and path, all outputs of %lld rows x 2 widths x tokens 1..17, "
      "64\n",
      ns::kernels::isa_name(ns::kernels::detected_isa()), static_cast<long long>(rows));
  for (const GgmlType type : kTypes) {
    const auto& tt = ns::gguf::traits(type);
    if (!opt.only.empty() && opt.only != tt.name) continue;
    const int64_t be = tt.block_elems;
    const std::vector<int64_t> widths = be == 256 ? std::vector<int64_t>{768, 1280}
                                        : be > 1  ? std::vector<int64_t>{7 * be, 33 * be}
                                                  : std::vector<int64_t>{203, 1056};
    // The reference conversions first: the weights quantized and dequantized,
    // and quantized with an importance matrix where the type's quantizer takes one.
    uint64_t hd = kFnvBasis, hq = kFnvBasis;
    for (const int64_t cols : widths) {
      std::mt19937 rng(static_cast<uint32_t>(cols));
      const auto wf = normal_floats(static_cast<size_t>(rows * cols), 0.1f, rng);
      const auto wq = make_weights(type, rows, cols, wf, rng);
      std::vector<float> back(static_cast<size_t>(rows * cols));
      ns::kernels::dequantize_row(type, wq.data(), back.data(), rows * cols);
      hd = fnv(fnv(hd, wq.data(), wq.size()), back.data(), back.size() * sizeof(float));
      if (ns::kernels::importance_use(type) == ns::kernels::Importance::used) {
        std::vector<float> importance(static_cast<size_t>(cols));
        for (auto& v : importance) v = std::uniform_real_distribution<float>(0.1f, 2.0f)(rng);
        std::vector<uint8_t> out(wq.size() / static_cast<size_t>(rows));
        for (int64_t r = 0; r < rows; ++r) {
          ns::kernels::quantize_row_weighted(type, wf.data() + r * cols, out.data(), cols, importance.data());
          hq = fnv(hq, out.data(), out.size());
        }
      }
    }
    std::printf("hash %-8s %-7s %016llx\n", std::string(tt.name).c_str(), "ref", static_cast<unsigned long long>(hd));
    if (ns::kernels::importance_use(type) == ns::kernels::Importance::used)
      std::printf("hash %-8s %-7s %016llx\n", std::string(tt.name).c_str(), "quant-w",
                  static_cast<unsigned long long>(hq));
    for (const Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
      if (isa > ns::kernels::detected_isa()) continue;
      ns::kernels::set_isa(isa);
      uint64_t h = kFnvBasis;
      for (const int64_t cols : widths) {
        std::mt19937 rng(static_cast<uint32_t>(cols));
        const auto wf = normal_floats(static_cast<size_t>(rows * cols), 0.1f, rng);
        const auto wq = make_weights(type, rows, cols, wf, rng);
        const ns::kernels::MatrixView w{type, wq.data(), rows, cols, wq.size() / static_cast<size_t>(rows)};
        const auto x = normal_floats(static_cast<size_t>(64 * cols), 2.0f, rng);
        for (const int64_t tokens : token_counts) {
          std::vector<float> y(static_cast<size_t>(tokens * rows));
          ns::kernels::MatmulScratch scratch;
          ns::kernels::matmul(w, x.data(), tokens, y.data(), pool, scratch);
          h = fnv(h, y.data(), y.size() * sizeof(float));
        }
      }
      std::printf("hash %-8s %-7s %016llx\n", std::string(tt.name).c_str(), ns::kernels::isa_name(isa),
                  static_cast<unsigned long long>(h));
    }
  }
  // The DSA indexer's scores (indexer.h) per path: heads x dims 8 x 64, 3 x 96, 5 x 72 against 50 keys.
  if (opt.only.empty() || opt.only == "indexer") {
    for (const Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
      if (isa > ns::kernels::detected_isa()) continue;
      uint64_t h = kFnvBasis;
      for (const auto& [heads, dim] : {std::pair<int64_t, int64_t>{8, 64}, {3, 96}, {5, 72}}) {
        std::mt19937 rng(static_cast<uint32_t>(heads * dim));
        const auto q = normal_floats(static_cast<size_t>(heads * dim), 1.0f, rng);
        const auto w = normal_floats(static_cast<size_t>(heads), 0.2f, rng);
        const auto kf = normal_floats(static_cast<size_t>(50 * dim), 1.0f, rng);
        std::vector<uint16_t> keys(kf.size());
        for (size_t i = 0; i < kf.size(); ++i) keys[i] = ns::kernels::fp32_to_fp16(kf[i]);
        std::vector<float> y(50);
        ns::kernels::indexer_scores(isa, q.data(), w.data(), heads, dim, keys.data(), dim, 50, y.data());
        h = fnv(h, y.data(), y.size() * sizeof(float));
      }
      std::printf("hash %-8s %-7s %016llx\n", "indexer", ns::kernels::isa_name(isa),
                  static_cast<unsigned long long>(h));
    }
  }
  ns::kernels::set_isa(ns::kernels::detected_isa());
  return 0;
}

// --indexer: the DSA lightning indexer's scores (engine/kernels/indexer.h) of
// one query against 4096 cached F16 keys, per ISA path, on one thread: the
// tiny goldens' shape (8 heads of 64), the profiled model's (32 of 128) and
// DeepSeek V3.2's (64 of 128). The scalar path is the loop it replaced.
int bench_indexer(const Options& opt) {
  struct Shape {
    int64_t n_head, head_dim;
  };
  constexpr int64_t kKeys = 4096;
  std::mt19937 rng(42);
  std::printf("indexer scores: %lld keys, one query, 1 thread, detected ISA %s, >= %.2f s per figure\n",
              static_cast<long long>(kKeys), ns::kernels::isa_name(ns::kernels::detected_isa()), opt.min_time);
  std::printf("%-8s %-8s %-7s %10s %10s %10s\n", "heads", "head_dim", "path", "us/query", "ns/key", "vs scalar");
  for (const Shape sh : {Shape{8, 64}, Shape{32, 128}, Shape{64, 128}}) {
    const std::vector<float> q = normal_floats(static_cast<size_t>(sh.n_head * sh.head_dim), 1.0f, rng);
    const std::vector<float> w = normal_floats(static_cast<size_t>(sh.n_head), 0.1f, rng);
    const std::vector<float> kf = normal_floats(static_cast<size_t>(kKeys * sh.head_dim), 1.0f, rng);
    std::vector<uint16_t> keys(kf.size());
    for (size_t i = 0; i < kf.size(); ++i) keys[i] = ns::kernels::fp32_to_fp16(kf[i]);
    std::vector<Path> paths;
    for (const Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
      if (isa > ns::kernels::detected_isa()) continue;
      Path p;
      p.name = ns::kernels::isa_name(isa);
      p.run = [&, isa](float* y) {
        ns::kernels::indexer_scores(isa, q.data(), w.data(), sh.n_head, sh.head_dim, keys.data(), sh.head_dim, kKeys,
                                    y);
      };
      p.y.resize(kKeys);
      paths.push_back(std::move(p));
    }
    measure(paths, opt.min_time);
    for (const Path& p : paths)
      std::printf("%-8lld %-8lld %-7s %10.1f %10.2f %9.1fx\n", static_cast<long long>(sh.n_head),
                  static_cast<long long>(sh.head_dim), p.name, p.best * 1e6, p.best * 1e9 / kKeys,
                  paths[0].best / p.best);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  if (opt.hash) return print_hashes(opt);
  if (opt.indexer) return bench_indexer(opt);
  const int64_t n = opt.size;
  ns::ThreadPool pool(opt.threads);
  std::printf("kernels bench: %lld x %lld weights, %d threads, detected ISA %s, >= %.2f s per figure\n",
              static_cast<long long>(n), static_cast<long long>(n), pool.size(),
              ns::kernels::isa_name(ns::kernels::detected_isa()), opt.min_time);

  // Zero-mean random weights and activations (tests/bench/README.md, "Honest benchmark models").
  std::mt19937 rng(42);
  const std::vector<float> wf = normal_floats(static_cast<size_t>(n * n), 0.02f, rng);
  const int64_t max_tokens = *std::max_element(opt.tokens.begin(), opt.tokens.end());
  const std::vector<float> x = normal_floats(static_cast<size_t>(max_tokens * n), 1.0f, rng);

  std::vector<std::vector<float>> row_buffers(static_cast<size_t>(pool.size()), std::vector<float>(n));
  const bool have_avx2 = ns::kernels::detected_isa() >= Isa::avx2;
  const bool have_avx512 = ns::kernels::detected_isa() >= Isa::avx512;
  if (!have_avx2) std::printf("no AVX2 on this CPU: the avx2 and deq+simd paths are skipped\n");
  if (!have_avx512) std::printf("no AVX-512 F/BW/VL/DQ + VNNI on this CPU: the avx512 path is skipped\n");
  std::printf("\n%-6s %6s  %-8s %9s %9s %8s %10s %10s %10s %10s\n", "type", "tokens", "path", "ms/call", "GFLOP/s",
              "GB/s", "vs scalar", "vs deq+dot", "vs deq+simd", "vs avx2");

  const auto wanted = [&opt](const char* path) {
    return opt.paths.empty() || std::find(opt.paths.begin(), opt.paths.end(), path) != opt.paths.end();
  };
  for (const GgmlType type : kTypes) {
    const auto& tt = ns::gguf::traits(type);
    const std::string name(tt.name);
    if (!opt.only.empty() && opt.only != name) continue;
    const std::vector<uint8_t> wq = make_weights(type, n, n, wf, rng);
    const ns::kernels::MatrixView w{type, wq.data(), n, n, ns::gguf::row_bytes(tt, static_cast<uint64_t>(n))};
    // The interleaved layout the weights land in (kernels.h, repack_rows), where the type has one.
    std::vector<uint8_t> wr = wq;                       // repacked once, after the timed round trips
    if (ns::kernels::repacked_type(type, n) != type) {  // what landing an expert costs per byte (warm cache)
      double best = 1e9;
      for (int i = 0; i < 5; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        ns::kernels::repack_rows(type, wr.data(), n, n);
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        ns::kernels::unpack_rows(type, wr.data(), n, n);
      }
      ns::kernels::repack_rows(type, wr.data(), n, n);
      std::printf("%-6s repack_rows in place: %.3f ms for %.1f MiB, %.2f GB/s (best of 5, one thread)\n", name.c_str(),
                  best * 1e3, static_cast<double>(wr.size()) / (1 << 20), static_cast<double>(wr.size()) / best / 1e9);
    }
    const ns::kernels::MatrixView w_repacked{ns::kernels::repacked_type(type, n), wr.data(), n, n, w.row_stride};
    const bool has_repack = w_repacked.type != type;
    const double weight_gb = static_cast<double>(wq.size()) / 1e9;

    for (const int64_t tokens : opt.tokens) {
      const double gflop = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(tokens) / 1e9;
      ns::kernels::MatmulScratch scratch;
      auto matmul_with = [&](Isa isa) {
        return [&, isa](float* y) {
          ns::kernels::set_isa(isa);
          ns::kernels::matmul(w, x.data(), tokens, y, pool, scratch);
        };
      };
      auto repacked_with = [&](Isa isa) {
        return [&, isa](float* y) {
          ns::kernels::set_isa(isa);
          ns::kernels::matmul(w_repacked, x.data(), tokens, y, pool, scratch);
        };
      };
      auto dequantize_with = [&](ns::kernels::VecDotFn dot) {
        return [&, dot](float* y) { dequantize_then_dot(w, x.data(), tokens, y, pool, row_buffers, dot); };
      };
      const size_t ny = static_cast<size_t>(tokens * n);
      std::vector<Path> all;
      all.push_back({"scalar", matmul_with(Isa::scalar), std::vector<float>(ny)});
      if (have_avx2) all.push_back({"avx2", matmul_with(Isa::avx2), std::vector<float>(ny)});
      if (have_avx512) all.push_back({"avx512", matmul_with(Isa::avx512), std::vector<float>(ny)});
      if (has_repack) {
        all.push_back({"rp-scalar", repacked_with(Isa::scalar), std::vector<float>(ny)});
        if (have_avx2) all.push_back({"rp-avx2", repacked_with(Isa::avx2), std::vector<float>(ny)});
        if (have_avx512) all.push_back({"rp-avx512", repacked_with(Isa::avx512), std::vector<float>(ny)});
      }
      all.push_back({"deq+dot", dequantize_with(plain_dot), std::vector<float>(ny)});
      if (have_avx2) {
        all.push_back(
            {"deq+simd", dequantize_with(ns::kernels::vec_dot(GgmlType::F32, Isa::avx2)), std::vector<float>(ny)});
      }
      std::vector<Path> paths;
      for (auto& p : all)
        if (wanted(p.name)) paths.push_back(std::move(p));
      if (paths.empty()) continue;
      measure(paths, opt.min_time);

      // A ratio against a path not timed prints as 0.
      const auto time_of = [&paths](const char* path) {
        for (const auto& p : paths)
          if (std::strcmp(p.name, path) == 0) return p.best;
        return 0.0;
      };
      const double t_scalar = time_of("scalar"), t_plain = time_of("deq+dot");
      const double t_simd = time_of("deq+simd"), t_avx2 = time_of("avx2");
      for (const auto& p : paths) {
        std::printf("%-6s %6lld  %-8s %9.3f %9.2f %8.2f %9.2fx %9.2fx", name.c_str(), static_cast<long long>(tokens),
                    p.name, p.best * 1e3, gflop / p.best, weight_gb / p.best, t_scalar / p.best, t_plain / p.best);
        if (have_avx2) std::printf(" %9.2fx %9.2fx", t_simd / p.best, t_avx2 / p.best);
        std::printf("\n");
      }
      // The paths compute the same product; they differ by the rounding of the
      // activations (matmul converts them to the vec-dot type) and of the sums.
      std::printf("%-6s %6lld  max |y - y_%s| / max |y_%s|:", name.c_str(), static_cast<long long>(tokens),
                  paths[0].name, paths[0].name);
      for (size_t i = 1; i < paths.size(); ++i)
        std::printf(" %s %.1e", paths[i].name, max_rel_diff(paths[i].y, paths[0].y));
      std::printf("\n");
    }
  }
  ns::kernels::set_isa(ns::kernels::detected_isa());
  return 0;
}
