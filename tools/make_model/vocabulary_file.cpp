// --vocab FILE.gguf: copy the tokenizer from a real vocabulary file.
#include <algorithm>

#include "common/error.h"
#include "engine/gguf/gguf_set.h"
#include "tools/make_model/vocabulary.h"

namespace ns::make_model {

Vocabulary vocabulary_from_gguf(const std::string& path) {
  // A real model's vocabulary may be any shard of a split set: its keys are the first shard's.
  const auto set = gguf::GgufSet::open(path);
  const gguf::GgufFile* file = &set->metadata();
  const gguf::Value* tokens = file->find("tokenizer.ggml.tokens");
  if (!tokens || tokens->type != gguf::ValueType::ARRAY || tokens->elem_type != gguf::ValueType::STRING ||
      tokens->arr.empty())
    throw Error(ErrorKind::bad_model,
                "'" + path +
                    "' has no tokenizer.ggml.tokens string array: pass a vocabulary "
                    "GGUF such as ggml-vocab-llama-spm.gguf, or omit --vocab for the built-in one");
  if (tokens->arr.size() > UINT32_MAX) throw Error(ErrorKind::bad_model, "'" + path + "' has too many tokens");

  // The reader's map is sorted by key; write them in the order llama.cpp's
  // converter does: the token lists, then the special token ids, then the
  // add_* flags, then anything else (chat template, ...).
  static const std::vector<std::string> kLeading = {"tokenizer.ggml.model",      "tokenizer.ggml.pre",
                                                    "tokenizer.ggml.tokens",     "tokenizer.ggml.scores",
                                                    "tokenizer.ggml.token_type", "tokenizer.ggml.merges"};
  auto rank = [&](const std::string& key) {
    const auto lead = std::find(kLeading.begin(), kLeading.end(), key);
    if (lead != kLeading.end()) return static_cast<int>(lead - kLeading.begin());
    if (key.size() > 9 && key.compare(key.size() - 9, 9, "_token_id") == 0) return 100;
    if (key.rfind("tokenizer.ggml.add_", 0) == 0) return 101;
    return 102;
  };
  std::vector<std::string> keys;
  for (const auto& [key, value] : file->metadata())
    if (key.rfind("tokenizer.", 0) == 0) keys.push_back(key);
  std::stable_sort(keys.begin(), keys.end(), [&](const auto& a, const auto& b) { return rank(a) < rank(b); });
  Vocabulary v;
  for (const auto& key : keys) v.metadata.emplace_back(key, *file->find(key));
  v.n_vocab = static_cast<uint32_t>(tokens->arr.size());
  v.source =
      path + " (" + std::to_string(v.n_vocab) + " tokens, " + file->get_string_or("tokenizer.ggml.model", "?") + ")";
  return v;
}

}  // namespace ns::make_model
