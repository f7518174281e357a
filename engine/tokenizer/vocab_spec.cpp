// VocabSpec::from_gguf: the tokenizer.* metadata keys, read into plain data.
#include "engine/gguf/gguf_file.h"
#include "engine/tokenizer/tokenizer.h"
#include "common/error.h"

namespace ns {

namespace {

std::optional<int64_t> read_id(const gguf::GgufFile& f, const std::string& key) {
  const gguf::Value* v = f.find(key);
  if (!v) return std::nullopt;
  if (!v->is_integer())
    throw Error(ErrorKind::bad_model, f.path() + ": metadata key '" + key + "' should be an integer token id but is " +
                                          gguf::value_type_name(v->type));
  return v->i;
}

std::optional<bool> read_flag(const gguf::GgufFile& f, const std::string& key) {
  if (!f.has(key)) return std::nullopt;
  return f.get_bool_or(key, false);
}

}  // namespace

VocabSpec VocabSpec::from_gguf(const gguf::GgufFile& f) {
  VocabSpec s;
  s.model = f.get_string("tokenizer.ggml.model");
  s.pre = f.get_string_or("tokenizer.ggml.pre", "");
  s.tokens = f.get_string_array("tokenizer.ggml.tokens");
  if (f.has("tokenizer.ggml.scores")) s.scores = f.get_f32_array("tokenizer.ggml.scores");
  if (f.has("tokenizer.ggml.token_type")) s.token_types = f.get_i32_array("tokenizer.ggml.token_type");
  if (f.has("tokenizer.ggml.merges")) s.merges = f.get_string_array("tokenizer.ggml.merges");
  s.bos_id = read_id(f, "tokenizer.ggml.bos_token_id");
  s.eos_id = read_id(f, "tokenizer.ggml.eos_token_id");
  s.eot_id = read_id(f, "tokenizer.ggml.eot_token_id");
  s.eom_id = read_id(f, "tokenizer.ggml.eom_token_id");
  s.unk_id = read_id(f, "tokenizer.ggml.unknown_token_id");
  s.sep_id = read_id(f, "tokenizer.ggml.seperator_token_id");  // sic: the GGUF key is spelled this way
  s.pad_id = read_id(f, "tokenizer.ggml.padding_token_id");
  s.mask_id = read_id(f, "tokenizer.ggml.mask_token_id");
  s.fim_pre_id = read_id(f, "tokenizer.ggml.fim_pre_token_id");
  s.fim_suf_id = read_id(f, "tokenizer.ggml.fim_suf_token_id");
  s.fim_mid_id = read_id(f, "tokenizer.ggml.fim_mid_token_id");
  s.fim_pad_id = read_id(f, "tokenizer.ggml.fim_pad_token_id");
  s.fim_rep_id = read_id(f, "tokenizer.ggml.fim_rep_token_id");
  s.fim_sep_id = read_id(f, "tokenizer.ggml.fim_sep_token_id");
  // Older files use these names for the FIM ids; the newer keys win.
  if (!s.fim_pre_id) s.fim_pre_id = read_id(f, "tokenizer.ggml.prefix_token_id");
  if (!s.fim_suf_id) s.fim_suf_id = read_id(f, "tokenizer.ggml.suffix_token_id");
  if (!s.fim_mid_id) s.fim_mid_id = read_id(f, "tokenizer.ggml.middle_token_id");
  s.add_bos = read_flag(f, "tokenizer.ggml.add_bos_token");
  s.add_eos = read_flag(f, "tokenizer.ggml.add_eos_token");
  s.add_space_prefix = read_flag(f, "tokenizer.ggml.add_space_prefix");
  s.model_name = f.get_string_or("general.name", "");
  return s;
}

}  // namespace ns
