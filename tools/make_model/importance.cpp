#include "tools/make_model/importance.h"

#include <cmath>
#include <cstring>

#include "engine/gguf/gguf_file.h"
#include "common/error.h"

namespace ns::make_model {

ImportanceMatrix load_importance(const std::string& path, const std::vector<std::string>& include) {
  std::shared_ptr<gguf::GgufFile> f;
  try {
    f = gguf::GgufFile::open(path);
  } catch (const Error& e) {
    throw Error(ErrorKind::invalid_input,
                "--imatrix " + path + ": " + e.what() + " (give the GGUF file llama-imatrix writes)");
  }
  const auto bad = [&](const std::string& what) {
    return Error(ErrorKind::invalid_input, "--imatrix " + path + ": " + what);
  };
  const std::string sums_suffix = ".in_sum2", counts_suffix = ".counts";
  ImportanceMatrix m;
  for (const gguf::TensorInfo& t : f->tensors()) {
    if (t.name.size() <= sums_suffix.size() ||
        t.name.compare(t.name.size() - sums_suffix.size(), sums_suffix.size(), sums_suffix) != 0)
      continue;
    const std::string name = t.name.substr(0, t.name.size() - sums_suffix.size());
    bool included = include.empty();
    for (const auto& part : include) included = included || name.find(part) != std::string::npos;
    if (!included) continue;
    const gguf::TensorInfo* counts = f->find_tensor(name + counts_suffix);
    if (counts == nullptr) throw bad(t.name + " has no " + name + counts_suffix + " beside it");
    if (t.type != gguf::GgmlType::F32 || counts->type != gguf::GgmlType::F32)
      throw bad(name + ": in_sum2 and counts must be F32");
    const uint64_t n = t.n_elements(), n_counts = counts->n_elements();
    if (n_counts == 0 || n % n_counts != 0)
      throw bad(name + ": " + std::to_string(n) + " sums do not split into " + std::to_string(n_counts) + " experts");
    std::vector<float> sums(n), cnt(n_counts);
    std::memcpy(sums.data(), f->tensor_data(t), n * sizeof(float));
    std::memcpy(cnt.data(), f->tensor_data(*counts), n_counts * sizeof(float));
    const uint64_t ne0 = n / n_counts;
    std::vector<float>& w = m.weights[name];
    w.resize(n);
    for (uint64_t j = 0; j < n_counts; ++j) {
      // llama-quantize rounds the stored count to an integer, then divides in float.
      const auto count = static_cast<float>(std::lround(cnt[j]));
      for (uint64_t i = 0; i < ne0; ++i) w[j * ne0 + i] = count > 0.0f ? sums[j * ne0 + i] / count : 1.0f;
    }
    for (float v : w)
      if (!std::isfinite(v)) throw bad(name + " holds a non-finite value");
  }
  if (m.weights.empty())
    throw bad(include.empty() ? "no NAME.in_sum2 tensors: not an importance matrix from llama-imatrix"
                              : "no entry matches --imatrix-include");
  return m;
}

}  // namespace ns::make_model
