// ns-ref-dump: the reference implementation's outputs for one model, in the
// goldens' schema. nightshift's own program, compiled against the reference's
// public header (llama.h) by build_reference.sh; never part of nightshift.
//
//   ns-ref-dump MODEL.gguf PROMPTS.txt [TOP=8] [GREEDY=16] > out.json
//
// PROMPTS.txt: one prompt per line ("\n" inside a prompt written as the two
// characters backslash-n). For each prompt: its token ids (with BOS as the
// vocabulary says, special tokens parsed), the top-TOP logits at every prompt
// position (the whole prompt in one llama_decode, every position's logits),
// then GREEDY greedy tokens, each decoded alone, with the top-TOP logits
// before each choice. Flash attention is off (the 2026 build turns it on for
// CPU, which moves logits by up to 0.5), one sequence, 2 threads, F16 KV cache.
//
//   ns-ref-dump MODEL.gguf --synthetic N SEED LAST [TOP=8] [GREEDY=4] > out.json
//
// Long contexts (docs/long-context.md): no text, N token ids drawn by
// synthetic_token() below (the test draws the same), the whole prompt in one
// llama_decode (physical batches of NS_REF_UBATCH, default 512, so the
// score matrix stays small) with logits kept for the LAST positions only,
// then GREEDY greedy steps as above. One JSON object: n_tokens, seed,
// last_top_logits (positions N - LAST .. N - 1), greedy, greedy_top_logits.
//
// NS_REF_FLASH_ATTN=1 turns flash attention on (minimax-m3's sparse attention
// needs it: with it off the reference attends densely; make_goldens.sh's
// fa_models).
//
// Intermediate tensors (for finding where two engines round apart, issue 34):
// NS_REF_TENSORS=name,name,... (the graph's names without the "-LAYER"
// suffix, e.g. attn_norm,ffn_moe_probs,l_out; "*" for every node) and
// NS_REF_TENSOR_DIR=DIR write each such tensor the reference computes while
// decoding prompt NS_REF_PROMPT (default 0; its prompt pass only, not the
// greedy steps) to DIR/NAME-LAYER.K.bin, K the node's occurrence under that
// name in the pass (0, 1, ...; one graph per physical batch, so with
// NS_REF_UBATCH=N the passes are numbered on: names repeat per batch): four
// int64 sizes ne[0..3], then the values as F32 in ne order (F16/I32 converted).
// The outputs are the same with or without it.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "ggml-backend.h"
#include "ggml.h"
#include "llama.h"

namespace {

// The NS_REF_TENSORS dump (see the top): which names, where, and the
// occurrence counts so far; `on` only during the chosen prompt's pass.
struct TensorDump {
  std::vector<std::string> names;
  bool all = false, on = false;
  std::string dir;
  std::vector<std::pair<std::string, int>> seen;

  bool wanted(const char* full) const {
    if (all) return true;
    std::string base(full);
    const size_t dash = base.rfind('-');
    if (dash != std::string::npos) base.resize(dash);
    return std::find(names.begin(), names.end(), base) != names.end();
  }
  int occurrence(const std::string& name) {
    for (auto& [n, c] : seen)
      if (n == name) return ++c;
    seen.emplace_back(name, 0);
    return 0;
  }
};

float element_f32(const ggml_tensor* t, const char* p) {
  switch (t->type) {
    case GGML_TYPE_F32: return *reinterpret_cast<const float*>(p);
    case GGML_TYPE_F16: return ggml_fp16_to_fp32(*reinterpret_cast<const ggml_fp16_t*>(p));
    case GGML_TYPE_I32: return static_cast<float>(*reinterpret_cast<const int32_t*>(p));
    default: return NAN;
  }
}

bool dump_tensor_cb(ggml_tensor* t, bool ask, void* user) {
  auto* d = static_cast<TensorDump*>(user);
  if (!d->on || !d->wanted(t->name)) return ask ? false : true;
  if (ask) return true;
  if (t->type != GGML_TYPE_F32 && t->type != GGML_TYPE_F16 && t->type != GGML_TYPE_I32) return true;
  std::vector<char> raw(ggml_nbytes(t));
  ggml_backend_tensor_get(t, raw.data(), 0, raw.size());
  std::vector<float> out;
  out.reserve(static_cast<size_t>(ggml_nelements(t)));
  for (int64_t i3 = 0; i3 < t->ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < t->ne[2]; ++i2)
      for (int64_t i1 = 0; i1 < t->ne[1]; ++i1)
        for (int64_t i0 = 0; i0 < t->ne[0]; ++i0)
          out.push_back(element_f32(t, raw.data() + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3]));
  const std::string path = d->dir + "/" + t->name + "." + std::to_string(d->occurrence(t->name)) + ".bin";
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    const int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
    std::fwrite(ne, sizeof ne, 1, f);
    std::fwrite(out.data(), sizeof(float), out.size(), f);
    std::fclose(f);
  }
  return true;
}

TensorDump g_dump;

std::string json_escape(const std::string& s) {
  std::string o;
  for (unsigned char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          o += buf;
        } else {
          o += static_cast<char>(c);
        }
    }
  }
  return o;
}

std::string top_json(const float* logits, int n_vocab, int k) {
  std::vector<int> ids(static_cast<size_t>(n_vocab));
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                    [&](int a, int b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  std::string o = "[";
  for (int i = 0; i < k; ++i) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s[%d, %.6g]", i ? ", " : "", ids[static_cast<size_t>(i)],
                  static_cast<double>(logits[ids[static_cast<size_t>(i)]]));
    o += buf;
  }
  return o + "]";
}

std::string ids_json(const std::vector<llama_token>& v) {
  std::string o = "[";
  for (size_t i = 0; i < v.size(); ++i) o += (i ? ", " : "") + std::to_string(v[i]);
  return o + "]";
}

// Token i of a synthetic prompt: splitmix64 of (seed, i) mod n_vocab; the
// first token is the vocabulary's BOS where it has one.
llama_token synthetic_token(uint64_t seed, uint64_t i, int n_vocab) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + i + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<llama_token>(z % static_cast<uint64_t>(n_vocab));
}

// Greedy decoding after a prompt of n tokens whose last logits row is `last`:
// n_greedy steps, each feeding the argmax token at the next position; returns
// false when a decode fails. Fills the chosen ids and their top-k JSON rows.
bool greedy_steps(llama_context* ctx, const float* last, int n, int n_vocab, int n_greedy, int top,
                  std::vector<llama_token>* greedy, std::string* greedy_top) {
  *greedy_top = "[";
  std::vector<float> prev(last, last + n_vocab);
  for (int g = 0; g < n_greedy; ++g) {
    const llama_token next = static_cast<llama_token>(std::max_element(prev.begin(), prev.end()) - prev.begin());
    greedy->push_back(next);
    llama_batch one = llama_batch_init(1, 0, 1);
    one.token[0] = next;
    one.pos[0] = n + g;
    one.n_seq_id[0] = 1;
    one.seq_id[0][0] = 0;
    one.logits[0] = 1;
    one.n_tokens = 1;
    const int rc = llama_decode(ctx, one);
    if (rc == 0) {
      const float* row = llama_get_logits_ith(ctx, 0);
      *greedy_top += (g ? ", " : "") + top_json(row, n_vocab, top);
      prev.assign(row, row + n_vocab);
    }
    llama_batch_free(one);
    if (rc != 0) {
      std::fprintf(stderr, "decode failed\n");
      return false;
    }
  }
  *greedy_top += "]";
  return true;
}

// A context for one sequence on 2 threads, flash attention off (unless
// NS_REF_FLASH_ATTN). NS_REF_UBATCH=N
// splits a prompt into physical batches of N tokens (1: token by token);
// `ubatch` when it is unset. Null (with a message) when it cannot be made.
llama_context* open_context(llama_model* model, uint32_t n_ctx, uint32_t n_batch, uint32_t ubatch) {
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = n_ctx;
  cp.n_batch = n_batch;
  const char* ub = std::getenv("NS_REF_UBATCH");
  cp.n_ubatch = ub ? static_cast<uint32_t>(std::atoi(ub)) : ubatch;
  cp.n_seq_max = 1;
  cp.n_threads = 2;
  cp.n_threads_batch = 2;
  // NS_REF_FLASH_ATTN=1: on, for the one graph that needs it (minimax-m3's sparse
  // attention runs only with it; off, the reference attends densely).
  const char* fa = std::getenv("NS_REF_FLASH_ATTN");
  cp.flash_attn_type = fa && std::atoi(fa) ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
  cp.no_perf = true;
  if (!g_dump.dir.empty()) {
    cp.cb_eval = dump_tensor_cb;
    cp.cb_eval_user_data = &g_dump;
  }
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) std::fprintf(stderr, "cannot create a context of %u tokens\n", n_ctx);
  return ctx;
}

// The top-`top` logits at `count` positions from `from` on, as a JSON list.
std::string tops_json(llama_context* ctx, int from, int count, int n_vocab, int top) {
  std::string s = "[";
  for (int i = 0; i < count; ++i) s += (i ? ", " : "") + top_json(llama_get_logits_ith(ctx, from + i), n_vocab, top);
  return s + "]";
}

// `toks` in one llama_decode at positions 0.. of sequence 0, logits kept from
// position `keep_from` on. False (with a message) when the decode fails.
bool decode_all(llama_context* ctx, const std::vector<llama_token>& toks, int keep_from) {
  const int n = static_cast<int>(toks.size());
  llama_batch batch = llama_batch_init(n, 0, 1);
  for (int i = 0; i < n; ++i) {
    batch.token[i] = toks[static_cast<size_t>(i)];
    batch.pos[i] = i;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = i >= keep_from;
  }
  batch.n_tokens = n;
  const bool ok = llama_decode(ctx, batch) == 0;
  llama_batch_free(batch);
  if (!ok) std::fprintf(stderr, "decode failed\n");
  return ok;
}

int dump_synthetic(llama_model* model, int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s MODEL.gguf --synthetic N SEED LAST [TOP=8] [GREEDY=4]\n", argv[0]);
    return 2;
  }
  const int n = std::atoi(argv[3]);
  const uint64_t seed = std::strtoull(argv[4], nullptr, 10);
  const int last = std::atoi(argv[5]);
  const int top = argc > 6 ? std::atoi(argv[6]) : 8;
  const int n_greedy = argc > 7 ? std::atoi(argv[7]) : 4;
  if (n < 1 || last < 1 || last > n) {
    std::fprintf(stderr, "--synthetic: N >= 1 and 1 <= LAST <= N\n");
    return 2;
  }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int n_vocab = llama_vocab_n_tokens(vocab);
  std::vector<llama_token> toks(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) toks[static_cast<size_t>(i)] = synthetic_token(seed, static_cast<uint64_t>(i), n_vocab);
  if (llama_vocab_get_add_bos(vocab)) toks[0] = llama_vocab_bos(vocab);

  llama_context* ctx = open_context(model, static_cast<uint32_t>(n + n_greedy + 1), static_cast<uint32_t>(n), 512);
  if (!ctx) return 1;
  if (!decode_all(ctx, toks, n - last)) return 1;
  const std::string last_top = tops_json(ctx, n - last, last, n_vocab, top);
  std::vector<llama_token> greedy;
  std::string greedy_top;
  if (!greedy_steps(ctx, llama_get_logits_ith(ctx, n - 1), n, n_vocab, n_greedy, top, &greedy, &greedy_top)) return 1;
  std::printf(
      "{\"n_tokens\": %d, \"seed\": %llu, \"first_token\": %d,\n \"last_top_logits\": %s,\n"
      " \"greedy\": %s,\n \"greedy_top_logits\": %s}\n",
      n, static_cast<unsigned long long>(seed), toks[0], last_top.c_str(), ids_json(greedy).c_str(),
      greedy_top.c_str());
  llama_free(ctx);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL.gguf PROMPTS.txt [TOP=8] [GREEDY=16]\n", argv[0]);
    return 2;
  }
  const std::string model_path = argv[1];
  const bool synthetic = std::string(argv[2]) == "--synthetic";
  const int top = !synthetic && argc > 3 ? std::atoi(argv[3]) : 8;
  const int n_greedy = argc > 4 ? std::atoi(argv[4]) : 16;
  std::vector<std::string> prompts;
  if (!synthetic) {
    std::ifstream in(argv[2]);
    std::string line;
    while (std::getline(in, line)) {
      std::string p;
      for (size_t i = 0; i < line.size(); ++i) {
        if (line[i] == '\\' && i + 1 < line.size() && line[i + 1] == 'n') {
          p += '\n';
          ++i;
        } else {
          p += line[i];
        }
      }
      if (!p.empty()) prompts.push_back(p);
    }
  }

  if (const char* names = std::getenv("NS_REF_TENSORS")) {
    const char* dir = std::getenv("NS_REF_TENSOR_DIR");
    g_dump.dir = dir ? dir : ".";
    std::string list = names;
    for (size_t at = 0; at <= list.size();) {
      const size_t comma = std::min(list.find(',', at), list.size());
      if (comma > at) g_dump.names.push_back(list.substr(at, comma - at));
      at = comma + 1;
    }
    g_dump.all = std::find(g_dump.names.begin(), g_dump.names.end(), "*") != g_dump.names.end();
  }
  const char* dump_prompt = std::getenv("NS_REF_PROMPT");
  const size_t dump_index = dump_prompt ? static_cast<size_t>(std::atoi(dump_prompt)) : 0;

  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  // NS_REF_REPACK=1 keeps the CPU backend's weight repacking (interleaved
  // Q4_0/Q8_0/... layouts with their own GEMM kernels and summation order);
  // by default the goldens use the plain kernels, whose order nightshift's follow.
  const char* repack = std::getenv("NS_REF_REPACK");
  mp.use_extra_bufts = repack != nullptr && std::string(repack) == "1";
  llama_model* model = llama_model_load_from_file(model_path.c_str(), mp);
  if (!model) {
    std::fprintf(stderr, "cannot load %s\n", model_path.c_str());
    return 1;
  }
  if (std::string(argv[2]) == "--synthetic") {
    const int rc = dump_synthetic(model, argc, argv);
    llama_model_free(model);
    return rc;
  }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int n_vocab = llama_vocab_n_tokens(vocab);
  std::string name = model_path.substr(model_path.find_last_of('/') + 1);

  std::printf("[\n");
  for (size_t pi = 0; pi < prompts.size(); ++pi) {
    llama_context* ctx = open_context(model, 4096, 4096, 4096);
    if (!ctx) return 1;
    const std::string& prompt = prompts[pi];
    std::vector<llama_token> toks(prompt.size() + 16);
    const int n = llama_tokenize(vocab, prompt.c_str(), static_cast<int32_t>(prompt.size()), toks.data(),
                                 static_cast<int32_t>(toks.size()), true, true);
    if (n < 0) {
      std::fprintf(stderr, "tokenize failed\n");
      return 1;
    }
    toks.resize(static_cast<size_t>(n));

    g_dump.on = !g_dump.dir.empty() && pi == dump_index;
    if (!decode_all(ctx, toks, 0)) return 1;
    g_dump.on = false;
    const std::string prompt_top = tops_json(ctx, 0, n, n_vocab, top);

    std::vector<llama_token> greedy;
    std::string greedy_top;
    if (!greedy_steps(ctx, llama_get_logits_ith(ctx, n - 1), n, n_vocab, n_greedy, top, &greedy, &greedy_top)) return 1;
    std::printf(
        "  {\"model\": \"%s\", \"prompt\": \"%s\", \"prompt_tokens\": %s,\n   \"prompt_top_logits\": %s,\n"
        "   \"greedy\": %s,\n   \"greedy_top_logits\": %s}%s\n",
        json_escape(name).c_str(), json_escape(prompt).c_str(), ids_json(toks).c_str(), prompt_top.c_str(),
        ids_json(greedy).c_str(), greedy_top.c_str(), pi + 1 < prompts.size() ? "," : "");
    llama_free(ctx);
  }
  std::printf("]\n");
  llama_model_free(model);
  return 0;
}
