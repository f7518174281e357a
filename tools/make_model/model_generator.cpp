#include "tools/make_model/model_generator.h"

#include <algorithm>
#include <cmath>

#include "engine/arch/architecture.h"
#include "engine/kernels/kernels.h"
#include "common/error.h"
#include "engine/util/thread_pool.h"
#include "tools/make_model/table_plans.h"
#include "tools/make_model/vocabulary.h"
#include "tools/make_model/weight_init.h"
#include "tools/quantize/quantize_weighted.h"

namespace ns::make_model {

using gguf::GgmlType;
using gguf::val::str;
using gguf::val::u32;

namespace {

// The importance weights tensor t quantizes with as `type`, as llama-quantize
// would use them (see kernels.h's Importance); throws where the bytes could
// not match its.
const std::vector<float>* importance_for(const TensorPlan& t, GgmlType type, const ImportanceMatrix& m,
                                         const std::string& path) {
  const auto it = m.weights.find(t.name);
  const std::string tname(gguf::type_name(type));
  if (it == m.weights.end()) {
    if (kernels::needs_importance(type))
      throw Error(ErrorKind::invalid_input,
                  "tensor '" + t.name + "' is " + tname + ", which needs an importance matrix: " +
                      (path.empty() ? "pass one (--imatrix FILE from llama-imatrix)"
                                    : "--imatrix " + path + " has no entry for it (was it made on this model?)"));
    return nullptr;
  }
  const kernels::Importance use = kernels::importance_use(type);
  if (use == kernels::Importance::ignored || t.always_f32 || t.dims.size() < 2) return nullptr;
  if (use == kernels::Importance::unsupported)
    throw Error(ErrorKind::invalid_input,
                "tensor '" + t.name + "' is " + tname + " and --imatrix " + path +
                    " has an entry for it: llama-quantize would quantize it with the importance weights, which "
                    "nightshift's " +
                    tname +
                    " quantizer does not take, so the bytes would differ. Leave it out "
                    "(--imatrix-include, as llama-quantize --include-weights) or give the tensor another type");
  const uint64_t experts = t.dims.size() > 2 ? t.dims[2] : 1;
  if (it->second.size() != t.dims[0] * experts)
    throw Error(ErrorKind::invalid_input, "--imatrix " + path + ": the entry for '" + t.name + "' has " +
                                              std::to_string(it->second.size()) + " weights, the tensor needs " +
                                              std::to_string(t.dims[0] * experts) + " (" + std::to_string(t.dims[0]) +
                                              " columns x " + std::to_string(experts) +
                                              " experts): it was made on another model");
  return &it->second;
}

}  // namespace

std::unique_ptr<PlannedModel> plan_model(const GeneratorOptions& opt) {
  Architecture* arch = find_architecture(opt.arch);
  if (!arch)
    throw Error(ErrorKind::invalid_input,
                "unknown architecture '" + opt.arch + "'; choose one of " + architecture_names());
  // The type list must be known before any tensor is planned (general.file_type).
  const uint32_t file_type = file_type_of(opt.type);

  if (!opt.vocab_path.empty() && opt.vocab_pre != kBuiltinPre)
    throw Error(ErrorKind::invalid_input,
                "--vocab-pre applies to the built-in vocabulary only; a --vocab file keeps "
                "its own tokenizer.ggml.pre (drop one of the two)");
  if (opt.vocab_pre.empty())
    throw Error(ErrorKind::invalid_input, "--vocab-pre is empty: name a pre-tokenizer such as gpt-2 or kimi-k2");
  const Vocabulary vocab =
      opt.vocab_path.empty() ? builtin_vocabulary(opt.vocab_pre) : vocabulary_from_gguf(opt.vocab_path);
  Shape shape = opt.shape;
  shape.n_vocab = vocab.n_vocab;
  arch->validate(shape);

  auto model = std::make_unique<PlannedModel>();
  model->vocab_source = vocab.source;
  model->random_expert_codes = opt.random_expert_codes;
  gguf::GgufWriter& w = model->writer;
  // Key order as in llama.cpp's converter output (and ../shared/models).
  w.set("general.architecture", str(arch->name()));
  w.set("general.name", str(opt.name.empty() ? "random-" + arch->name() : opt.name));
  w.set("general.alignment", u32(gguf::GgufWriter::kDefaultAlignment));
  w.set("general.file_type", u32(file_type));
  arch->add_metadata(w, shape);
  for (const auto& [key, value] : vocab.metadata) w.set(key, value);
  if (!opt.chat_template.empty()) w.set("tokenizer.chat_template", str(opt.chat_template));

  if (!opt.imatrix_path.empty()) model->importance = load_importance(opt.imatrix_path, opt.imatrix_include);
  model->tensors = table_plans(*arch, w, shape);
  for (const TensorPlan& t : model->tensors) {
    const GgmlType type = choose_type(t, opt.type, opt.overrides);
    model->types.push_back(type);
    model->tensor_importance.push_back(importance_for(t, type, model->importance, opt.imatrix_path));
    w.add_tensor(t.name, t.dims, type);
    uint64_t n = 1;
    for (uint64_t d : t.dims) n *= d;
    model->n_params += n;
    model->n_active_params += t.expert ? n / t.dims.back() * shape.n_expert_used : n;
  }
  return model;
}

void write_model(PlannedModel& model, const std::string& path, uint64_t seed, ThreadPool& pool,
                 const Progress& progress) {
  constexpr uint64_t kChunkBytes = 8u << 20;  // encoded bytes generated per step
  gguf::GgufWriter& w = model.writer;
  w.open(path);
  std::vector<uint8_t> chunk;
  std::vector<std::vector<float>> scratch(static_cast<size_t>(pool.size()));
  for (size_t i = 0; i < model.tensors.size(); ++i) {
    const TensorPlan& plan = model.tensors[i];
    const GgmlType type = model.types[i];
    const auto n = static_cast<int64_t>(plan.dims[0]);
    uint64_t rows = 1;
    for (size_t d = 1; d < plan.dims.size(); ++d) rows *= plan.dims[d];
    const uint64_t row_bytes = gguf::row_bytes(gguf::traits(type), plan.dims[0]);
    const uint64_t key = tensor_key(plan.name);
    const uint64_t rows_per_chunk = std::max<uint64_t>(1, kChunkBytes / row_bytes);
    const std::vector<float>* weights = model.tensor_importance[i];
    const uint64_t rows_per_expert = plan.dims.size() > 1 ? plan.dims[1] : 1;  // importance row = expert
    for (auto& s : scratch) s.resize(static_cast<size_t>(n));
    const bool codes = model.random_expert_codes && plan.expert && !plan.fill && type == GgmlType::MXFP4 &&
                       plan.init.kind == Init::Kind::normal;

    for (uint64_t first = 0; first < rows; first += rows_per_chunk) {
      const uint64_t count = std::min(rows_per_chunk, rows - first);
      chunk.resize(count * row_bytes);
      pool.parallel_for(static_cast<int64_t>(count), [&](int thread, int64_t begin, int64_t end) {
        float* row = scratch[static_cast<size_t>(thread)].data();
        for (int64_t r = begin; r < end; ++r) {
          if (codes) {
            fill_mxfp4_codes(seed, key, first + static_cast<uint64_t>(r), plan.init,
                             chunk.data() + static_cast<uint64_t>(r) * row_bytes, n);
            continue;
          }
          if (plan.fill)
            plan.fill(seed, first + static_cast<uint64_t>(r), row, n);
          else
            fill_row(seed, key, first + static_cast<uint64_t>(r), plan.init, row, n);
          if (type == GgmlType::I32) {  // an integer table: the row's values rounded
            auto* out = reinterpret_cast<int32_t*>(chunk.data() + static_cast<uint64_t>(r) * row_bytes);
            for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int32_t>(std::lrint(row[i]));
            continue;
          }
          const uint64_t global_row = first + static_cast<uint64_t>(r);
          const float* importance =
              weights ? weights->data() + global_row / rows_per_expert * static_cast<uint64_t>(n) : nullptr;
          kernels::quantize_row_weighted(type, row, chunk.data() + static_cast<uint64_t>(r) * row_bytes, n, importance);
        }
      });
      w.write_data(chunk);
    }
    if (progress) progress(w.bytes_written(), w.file_size());
  }
  w.close();
}

void write_header_only(PlannedModel& model, const std::string& path) {
  model.writer.open(path);
  model.writer.close_without_data();
}

}  // namespace ns::make_model
