// nightshift-make-model: writes random-weight GGUF models of any shape, for
// tests and benchmarks (e.g. a DeepSeek-shaped model three times the memory
// budget). Same flags + same --seed give a byte-identical file.
//
// Exit codes (as the nightshift CLI): 0 ok, 1 failure (I/O, internal), 2 bad
// command line, 4 input rejected (impossible shape, bad --vocab file).
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "engine/gguf/gguf_set.h"
#include "engine/gguf/gguf_split.h"
#include "engine/util/thread_pool.h"
#include "tools/make_model/model_generator.h"

namespace {

using namespace ns;
using namespace ns::make_model;

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
constexpr int kExitInvalidInput = 4;

std::string human_bytes(uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
  return buf;
}

std::string human_count(uint64_t n) {
  char buf[32];
  if (n >= 1000000000ull)
    std::snprintf(buf, sizeof buf, "%.2fB", static_cast<double>(n) / 1e9);
  else if (n >= 1000000ull)
    std::snprintf(buf, sizeof buf, "%.2fM", static_cast<double>(n) / 1e6);
  else if (n >= 1000ull)
    std::snprintf(buf, sizeof buf, "%.1fK", static_cast<double>(n) / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(n));
  return buf;
}

void print_summary(const PlannedModel& m, const GeneratorOptions& opt, const std::string& out) {
  std::map<std::string, int> by_type;
  for (auto t : m.types) ++by_type[std::string(gguf::type_name(t))];
  std::string types;
  for (const auto& [name, count] : by_type) types += (types.empty() ? "" : ", ") + name + " x" + std::to_string(count);
  const Shape& s = opt.shape;
  std::printf("%s: %s, %zu tensors (%s), %s parameters (%s active per token), %s (%llu bytes)\n", out.c_str(),
              opt.arch.c_str(), m.tensors.size(), types.c_str(), human_count(m.n_params).c_str(),
              human_count(m.n_active_params).c_str(), human_bytes(m.writer.file_size()).c_str(),
              static_cast<unsigned long long>(m.writer.file_size()));
  const std::string ffn = s.n_expert ? std::to_string(s.n_expert) + " experts (top-" + std::to_string(s.n_expert_used) +
                                           ") of n_ff " + std::to_string(s.n_ff)
                                     : "dense n_ff " + std::to_string(s.n_ff);
  std::printf("  shape: n_embd %u, n_layer %u, n_head %u (%u kv), %s, n_ctx %u, vocab %s\n", s.n_embd, s.n_layer,
              s.n_head, s.n_head_kv, ffn.c_str(), s.n_ctx, m.vocab_source.c_str());
}

// Rewrites the model at `path` as gguf-split shards beside it and removes it.
void write_shards(const std::string& path, size_t max_tensors, bool metadata_only_first) {
  constexpr std::string_view ext = ".gguf";
  const bool has_ext = path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0;
  const std::string prefix = has_ext ? path.substr(0, path.size() - ext.size()) : path;
  std::vector<std::string> shards;
  {
    const auto whole = gguf::GgufSet::open(path);
    shards = gguf::write_split(*whole, prefix, {max_tensors, metadata_only_first});
  }
  std::remove(path.c_str());
  std::printf("  split into %zu shards (at most %zu tensors each%s): %s ... %s\n", shards.size(), max_tensors,
              metadata_only_first ? ", the first metadata only" : "", shards.front().c_str(), shards.back().c_str());
}

int run(int argc, char** argv) {
  CLI::App app{"Write a random-weight GGUF model of a given architecture and shape (deterministic per --seed)."};
  GeneratorOptions opt;
  std::string type_name = "Q8_0";
  std::vector<std::string> overrides;
  std::string out;
  bool print_size_only = false;
  int threads = 0;

  std::string arch_help = "architecture (" + architecture_names() + ")";
  app.add_option("--arch", opt.arch, arch_help)->capture_default_str();
  Shape& s = opt.shape;
  app.add_option("--n-embd", s.n_embd, "embedding width")->capture_default_str();
  app.add_option("--n-layer", s.n_layer, "number of blocks")->capture_default_str();
  app.add_option("--n-head", s.n_head, "attention heads")->capture_default_str();
  app.add_option("--n-head-kv", s.n_head_kv, "key/value heads (GQA)")->capture_default_str();
  app.add_option("--n-ff", s.n_ff, "feed-forward width (per expert in MoE layers)")->capture_default_str();
  app.add_option("--n-expert", s.n_expert, "routed experts per layer (0: dense)")->capture_default_str();
  app.add_option("--n-expert-used", s.n_expert_used, "experts per token")->capture_default_str();
  app.add_option("--n-ctx", s.n_ctx, "context_length written to the metadata")->capture_default_str();
  app.add_option("--rope-base", s.rope_base, "RoPE frequency base")->capture_default_str();
  app.add_option("--rms-eps", s.rms_eps, "RMSNorm epsilon")->capture_default_str();
  app.add_option("--type", type_name, "tensor type: " + encodable_type_names())->capture_default_str();
  app.add_option("--tensor-type", overrides,
                 "PATTERN=TYPE override, repeatable, last match wins; PATTERN is a substring or a regex of the "
                 "tensor name (norms and ffn_gate_inp stay F32)");
  app.add_option("--imatrix", opt.imatrix_path,
                 "importance matrix (the GGUF llama-imatrix writes): IQ2_XXS, IQ2_XS, IQ1_S, IQ1_M, IQ3_XXS and IQ4_XS "
                 "tensors "
                 "quantize with it as llama-quantize --imatrix does (IQ2_XXS, IQ2_XS and IQ1_S need it)")
      ->check(CLI::ExistingFile);
  app.add_option("--imatrix-include", opt.imatrix_include,
                 "use the --imatrix entries of tensors whose name contains this only (repeatable; as llama-quantize "
                 "--include-weights)");
  app.add_flag("--tied-output", s.tied_output, "omit output.weight (the head reuses token_embd)");
  app.add_option("--vocab", opt.vocab_path, "copy every tokenizer.* key from this GGUF (default: built-in BPE)")
      ->check(CLI::ExistingFile);
  app.add_option("--vocab-pre", opt.vocab_pre,
                 "tokenizer.ggml.pre of the built-in vocabulary (e.g. kimi-k2); its tokens and merges stay the same")
      ->capture_default_str();
  app.add_option("--seed", opt.seed, "random seed")->capture_default_str();
  app.add_option("--name", opt.name, "general.name (default: random-<arch>)");
  app.add_option("--chat-template", opt.chat_template,
                 "tokenizer.chat_template: a Jinja chat template as instruct models carry (chat jobs need one)");
  app.add_option("--out", out, "output path");
  app.add_option("--threads", threads, "generator threads (0: all cores)")->capture_default_str();
  app.add_flag("--print-size-only", print_size_only, "print the file size in bytes and write nothing");
  app.add_flag("--random-expert-codes", opt.random_expert_codes,
               "MXFP4 routed experts as uniformly random codes (zero-mean, about the normal rows' deviation) instead "
               "of quantized normal rows: ~30x faster, for multi-GiB bench models");
  bool weights_version = false;
  app.add_flag("--weights-version", weights_version,
               "print the generation of the weights these flags give (changes when the generator's weights do) and "
               "exit");
  size_t split_max_tensors = 0;
  bool no_tensor_first_split = false;
  app.add_option("--split-max-tensors", split_max_tensors,
                 "write the model as gguf-split shards of at most N tensors each: --out NAME.gguf gives "
                 "NAME-00001-of-0000K.gguf, ... (0: one file)")
      ->capture_default_str();
  app.add_flag("--no-tensor-first-split", no_tensor_first_split,
               "with --split-max-tensors: the first shard holds the metadata only (gguf-split's flag of that name)");
  bool header_only = false;
  app.add_flag("--header-only", header_only,
               "write the metadata and tensor table, with every tensor zero and no disk space for the data (a sparse "
               "file): a real model's shape for `nightshift model info --memory-budget`");
  for (Architecture* a : all_architectures()) a->add_flags(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitUsage;  // --help is not an error
  }
  if (weights_version) {
    std::printf("%d\n", kWeightsVersion);
    return 0;
  }
  if (!print_size_only && out.empty()) {
    std::fprintf(stderr, "error: --out PATH is required (or use --print-size-only)\n");
    return kExitUsage;
  }

  try {
    opt.type = parse_type(type_name);
    for (const auto& o : overrides) opt.overrides.push_back(parse_override(o));
    auto model = plan_model(opt);
    if (print_size_only) {
      std::printf("%llu\n", static_cast<unsigned long long>(model->writer.file_size()));
      return 0;
    }
    if (header_only) {
      write_header_only(*model, out);
      print_summary(*model, opt, out);
      std::printf("  header only: the tensor data reads as zeros and takes no disk space\n");
      return 0;
    }
    ThreadPool pool(threads);
    const auto start = std::chrono::steady_clock::now();
    auto last_report = start;
    const bool report = model->writer.file_size() > (1ull << 30);  // progress only for big files
    write_model(*model, out, opt.seed, pool, [&](uint64_t done, uint64_t total) {
      const auto now = std::chrono::steady_clock::now();
      if (!report || now - last_report < std::chrono::seconds(5)) return;
      last_report = now;
      std::fprintf(stderr, "  %s / %s written\n", human_bytes(done).c_str(), human_bytes(total).c_str());
    });
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    print_summary(*model, opt, out);
    std::printf("  written in %.2f s (%.0f MiB/s, %d threads)\n", secs,
                static_cast<double>(model->writer.file_size()) / (1 << 20) / std::max(secs, 1e-9), pool.size());
    if (split_max_tensors > 0) write_shards(out, split_max_tensors, no_tensor_first_split);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return e.kind() == ErrorKind::invalid_input || e.kind() == ErrorKind::bad_model ? kExitInvalidInput : kExitFailure;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return kExitFailure;
  }
}

}  // namespace

int main(int argc, char** argv) { return run(argc, argv); }
