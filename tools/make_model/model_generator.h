// Plans a random model (metadata, tensor list, types, exact file layout) and
// streams it to disk.
//
// Contract: plan_model() writes nothing and keeps no tensor data, so the file
// size of any model can be computed instantly. write_model() generates rows in
// bounded chunks (a few MiB per chunk, rows spread over the thread pool),
// encodes them with kernels::quantize_row and streams them through the
// GgufWriter: memory use does not grow with the model. The bytes depend only on
// the plan and the seed, not on the number of threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/gguf/gguf_writer.h"
#include "tools/make_model/architecture.h"
#include "tools/make_model/importance.h"
#include "tools/make_model/tensor_types.h"
#include "tools/make_model/vocabulary.h"

namespace ns {
class ThreadPool;
}

namespace ns::make_model {

// The generation of the weights the same flags and seed give: bumped whenever a
// change to the generator makes them write other weights (`--weights-version`),
// so tests/bench/bench_lib.sh's cached bench models are made again instead of
// measuring the old weights. 2: the sigmoid routers' selection bias sized by the
// load spread it causes (2026-12-01; plan_builder.cpp selection_bias).
inline constexpr int kWeightsVersion = 2;

struct GeneratorOptions {
  std::string arch = "llama";
  Shape shape;
  gguf::GgmlType type = gguf::GgmlType::Q8_0;
  std::vector<TypeOverride> overrides;
  std::string vocab_path;               // empty: the built-in vocabulary
  std::string vocab_pre = kBuiltinPre;  // the built-in vocabulary's tokenizer.ggml.pre
  std::string name;                     // general.name; empty: "random-<arch>"
  std::string chat_template;            // tokenizer.chat_template (Jinja text); empty: none, or the --vocab file's
  uint64_t seed = 0;
  std::string imatrix_path;  // empty: none; else llama-imatrix's GGUF (importance.h)
  // Non-empty: only the entries whose tensor name contains one of these (llama-quantize --include-weights).
  std::vector<std::string> imatrix_include;
  bool random_expert_codes = false;  // MXFP4 routed experts as random codes (fill_mxfp4_codes)
};

struct PlannedModel {
  gguf::GgufWriter writer;          // metadata and tensors declared, nothing written
  std::vector<TensorPlan> tensors;  // in file order, parallel to writer's tensors
  std::vector<gguf::GgmlType> types;
  std::string vocab_source;
  uint64_t n_params = 0;
  uint64_t n_active_params = 0;  // per token: experts count n_expert_used / n_expert
  ImportanceMatrix importance;   // --imatrix
  // Per tensor: its importance weights (n_expert rows of dims[0]) when its type
  // quantizes with them (kernels::importance_use), else null.
  std::vector<const std::vector<float>*> tensor_importance;
  bool random_expert_codes = false;  // GeneratorOptions' flag
};

// Throws ns::Error(invalid_input) for impossible shapes or types, bad_model/io for a bad --vocab file, and
// for an importance matrix that does not fit (a type that needs one without an entry, an entry of the wrong
// size, or one for a type whose quantizer here cannot use it: kernels.h's Importance).
std::unique_ptr<PlannedModel> plan_model(const GeneratorOptions& options);

// Called after each tensor with the bytes written so far.
using Progress = std::function<void(uint64_t bytes_written, uint64_t total_bytes)>;

// Generates and writes the planned model to `path`. Throws ns::Error(io) naming the path on failure
// (the partial file is removed).
void write_model(PlannedModel& model, const std::string& path, uint64_t seed, ThreadPool& pool,
                 const Progress& progress = {});
// The planned model's header with zeros for every tensor, as a sparse file
// (no disk space for the data): real shapes for `nightshift model info`.
void write_header_only(PlannedModel& model, const std::string& path);

}  // namespace ns::make_model
