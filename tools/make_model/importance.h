// --imatrix FILE: the importance matrix llama-imatrix writes (GGUF: per
// weight tensor NAME the F32 tensors NAME.in_sum2, the summed squared
// activations of every input feature, one row per expert, and NAME.counts,
// the tokens seen per expert), turned into per-column weights as
// llama-quantize does: in_sum2 / count per expert, 1 where an expert saw no
// token. The generator quantizes with them so that its file holds the bytes
// llama-quantize writes from the same F32 model and the same file
// (tests/conformance/reference/make_lowbit_goldens.sh).
#pragma once

#include <map>
#include <string>
#include <vector>

namespace ns::make_model {

struct ImportanceMatrix {
  // tensor name -> n_expert rows of dims[0] weights (one row for a 2-D weight)
  std::map<std::string, std::vector<float>> weights;
};

// Throws ns::Error (invalid_input) naming the file and what is wrong with it.
// A non-empty `include` keeps only the entries whose name contains one of its
// strings, as llama-quantize --include-weights does.
ImportanceMatrix load_importance(const std::string& path, const std::vector<std::string>& include = {});

}  // namespace ns::make_model
