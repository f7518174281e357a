// Constrained decoding overhead: the grammar mask vs a decode step, measured
// in the same run (not run by ctest; docs/constrained-decoding.md quotes it).
//
//   ns_bench_grammar MODEL [--batch 32] [--steps 24] [--threads N]
//
// MODEL should carry a large vocabulary (e.g. nightshift-make-model --vocab
// ../shared/vocab/ggml-vocab-qwen2.gguf: 151,936 tokens). The bench
//  1. builds the vocabulary's token trie;
//  2. compiles an extraction schema, tokenizes a valid output of it with the
//     model's tokenizer and, at every token boundary (the states a generation
//     passes through), times one mask computed from scratch (the trie walk,
//     no cache) and, on three of them, the scalar reference (each token fed
//     alone), checking both agree;
//  3. decodes --steps sampled tokens with --batch unconstrained sequences
//     (the decode step time);
//  4. decodes the same number of steps with --batch sequences constrained by
//     the schema (sampled, distinct seeds): the time spent masking per step,
//     as GenerationBatch measures it (the mask cache at work), and the step time.
// Overheads are printed as a share of the unconstrained decode step.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/batch/generation_batch.h"
#include "engine/gguf/gguf_file.h"
#include "engine/grammar/json_schema.h"
#include "engine/grammar/matcher.h"
#include "engine/tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

const char* kSchema = R"({"type":"object","properties":{
  "title":{"type":"string"},"authors":{"type":"array","items":{"type":"string"},"maxItems":8},
  "year":{"type":"integer"},"venue":{"type":"string"},
  "kind":{"enum":["article","book","thesis","report"]},
  "score":{"type":"number"},"open_access":{"type":"boolean"},
  "summary":{"type":"string"}},
  "required":["title","authors","year","kind"],"additionalProperties":false})";

const char* kOutput =
    "{\"title\": \"Attention Is All You Need\", \"authors\": [\"Ashish Vaswani\", \"Noam Shazeer\", "
    "\"Niki Parmar\"], \"year\": 2017, \"venue\": \"NeurIPS\", \"kind\": \"article\", \"score\": 9.75, "
    "\"open_access\": true, \"summary\": \"The Transformer: a sequence model built on attention alone, "
    "without recurrence or convolutions; it trains faster and translates better (28.4 BLEU on WMT 2014 "
    "English-to-German).\\nIt \\\"generalizes\\\" well.\"}";

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Mean decode step time (ms) of `batch` sequences over `steps` steps; returns grammar ms per decode step too.
double decode_steps(ns::Engine& engine, int batch, int steps, const std::string& grammar, double* grammar_ms_per_step,
                    int* finished_early) {
  auto b = engine.open_batch();
  for (int i = 0; i < batch; ++i) {
    ns::SamplingParams p;
    p.max_tokens = steps + 1;
    p.seed = static_cast<uint64_t>(i);
    p.temperature = 0.8f;  // the same sampler both ways: only the grammar differs
    if (grammar.empty())
      p.ignore_eos = true;
    else
      p.grammar = grammar;
    b->add({"Extract the bibliographic record of paper " + std::to_string(i) + " as JSON:", p, {}, {}, {}, {}});
  }
  double total = 0, grammar_s = 0;
  int n = 0;
  while (b->active() > 0) {
    const double g0 = b->grammar_seconds();
    const auto t = Clock::now();
    b->step();
    const double ms = ms_since(t);
    if (b->last_step().prefill_tokens == 0 && b->last_step().decode_tokens == batch) {
      total += ms;
      grammar_s += b->grammar_seconds() - g0;
      ++n;
    }
    for (auto& [h, r] : b->take_finished())
      if (r.finish_reason == "stop") ++*finished_early;
  }
  *grammar_ms_per_step = n ? grammar_s * 1e3 / n : 0;
  return n ? total / n : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0) {
    std::fprintf(stderr, "usage: ns_bench_grammar MODEL [--batch 32] [--steps 24] [--threads N]\n");
    return 2;
  }
  const std::string model = argv[1];
  int batch = 32, steps = 24, threads = 0;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (k == "--batch")
      batch = v;
    else if (k == "--steps")
      steps = v;
    else if (k == "--threads")
      threads = v;
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  try {
    const auto tok = ns::Tokenizer::from_gguf(*ns::gguf::GgufFile::open(model));
    auto t = Clock::now();
    const auto trie = ns::grammar::TokenTrie::from_tokenizer(*tok);
    const double trie_ms = ms_since(t);
    std::printf("vocabulary: %d tokens, trie of %zu nodes built in %.1f ms\n", tok->n_vocab(), trie->nodes().size(),
                trie_ms);

    const std::string gbnf = ns::grammar::json_schema_to_gbnf(nlohmann::ordered_json::parse(kSchema));
    const ns::grammar::Grammar g = ns::grammar::parse_gbnf(gbnf);
    const std::vector<int32_t> ids = tok->encode(kOutput, false, false);
    ns::grammar::Matcher m(g);
    std::vector<double> cold;
    double ref_ms = 0;
    int ref_n = 0;
    ns::grammar::TokenMask fast, ref;
    for (size_t i = 0; i <= ids.size(); ++i) {
      t = Clock::now();
      m.token_mask(*trie, fast);
      cold.push_back(ms_since(t));
      if (i == 0 || i == ids.size() / 2 || i == ids.size() - 1) {
        t = Clock::now();
        m.token_mask_reference(*trie, ref);
        ref_ms += ms_since(t);
        ++ref_n;
        if (ref != fast) {
          std::fprintf(stderr, "MISMATCH: the trie mask differs from the scalar reference at token %zu\n", i);
          return 1;
        }
      }
      if (i == ids.size()) break;
      if (!m.accept_bytes(tok->token_to_piece(ids[i]))) {
        std::fprintf(stderr, "the sample output does not follow the schema's grammar at token %zu\n", i);
        return 1;
      }
    }
    // Again with the walk's working memory kept from state to state (what a cache miss costs in a run).
    std::vector<double> warm;
    {
      ns::grammar::Matcher w(g);
      ns::grammar::MaskScratch scratch;
      for (size_t i = 0; i <= ids.size(); ++i) {
        t = Clock::now();
        w.token_mask(*trie, fast, scratch);
        warm.push_back(ms_since(t));
        if (i < ids.size()) w.accept_bytes(tok->token_to_piece(ids[i]));
      }
    }
    const double warm_mean = [&] {
      double s = 0;
      for (double x : warm) s += x;
      return s / static_cast<double>(warm.size());
    }();
    const double cold_mean = [&] {
      double s = 0;
      for (double x : cold) s += x;
      return s / static_cast<double>(cold.size());
    }();
    std::printf(
        "mask from scratch (trie walk) over %zu states: mean %.3f ms, median %.3f ms, max %.3f ms; "
        "scalar reference %.1f ms (agrees)\n",
        cold.size(), cold_mean, median(cold), *std::max_element(cold.begin(), cold.end()), ref_ms / ref_n);
    std::printf("mask with the walk's memory kept from state to state: mean %.3f ms, median %.3f ms, max %.3f ms\n",
                warm_mean, median(warm), *std::max_element(warm.begin(), warm.end()));

    ns::EngineOptions o;
    o.max_sequences = batch;
    o.context = 256;
    o.threads = threads;
    auto engine = ns::Engine::load(model, o);
    double unused = 0;
    int early = 0;
    const double step_ms = decode_steps(*engine, batch, steps, "", &unused, &early);
    early = 0;
    double grammar_ms = 0;
    const double constrained_step_ms = decode_steps(*engine, batch, steps, gbnf, &grammar_ms, &early);
    std::printf("decode step at batch %d: %.2f ms unconstrained, %.2f ms constrained (%d finished early)\n", batch,
                step_ms, constrained_step_ms, early);
    const double cold_share = 100.0 * batch * cold_mean / step_ms;
    const double cached_share = 100.0 * grammar_ms / step_ms;
    std::printf(
        "masking per step at batch %d: %.3f ms measured in the constrained run (mask cache) = %.2f %% of a "
        "decode step; every mask from scratch would be %.2f ms = %.1f %%\n",
        batch, grammar_ms, cached_share, batch * cold_mean, cold_share);
    std::printf(
        "RESULT vocab=%d trie_ms=%.1f mask_cold_ms=%.4f mask_cold_max_ms=%.4f mask_warm_ms=%.4f reference_ms=%.1f batch=%d "
        "step_ms=%.3f constrained_step_ms=%.3f mask_ms_per_step=%.4f overhead_pct=%.3f cold_pct=%.2f\n",
        tok->n_vocab(), trie_ms, cold_mean, *std::max_element(cold.begin(), cold.end()), warm_mean, ref_ms / ref_n,
        batch, step_ms, constrained_step_ms, grammar_ms, cached_share, cold_share);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ns_bench_grammar: %s\n", e.what());
    return 1;
  }
  return 0;
}
