// Text <-> token ids, from a GGUF file's tokenizer.* metadata.
//
// Supports tokenizer.ggml.model "llama" (SentencePiece-style, scores) and
// "gpt2" (byte-level BPE, merges) with the pre-tokenizers named by
// tokenizer.ggml.pre. Behaviour follows llama.cpp's vocabulary code, which
// produced the conformance vectors in ../shared/vocab.
//
// Contract: from_gguf() throws ns::Error(bad_model) naming the missing or
// malformed key, or the unsupported model/pre-tokenizer and the supported ones.
// Const methods are thread-safe. Methods taking a token id throw
// ns::Error(invalid_input) for an id outside [0, n_vocab()).
//
// Text may be any bytes: invalid UTF-8 never crashes or reads out of bounds.
// SentencePiece vocabularies keep such bytes through byte-fallback tokens;
// byte-level BPE replaces each invalid byte by U+FFFD first, as llama.cpp does
// (such vocabularies often lack tokens for bytes like 0xFF).
//
// Decoding (decode) does what llama.cpp's detokenizer does by default:
//  - SentencePiece: when add_space_prefix is on, one leading space is removed
//    from the first token's piece, undoing the space encode() put in front
//    (if that first token is BOS, it absorbs the removal, as in llama.cpp);
//  - BPE vocabularies with clean_spaces (gpt-2, falcon, starcoder, default)
//    drop the space before ? ! . , and in " 's", " 'm", " 're", " 've",
//    as Hugging Face's clean_up_tokenization_spaces does (this is lossy).
// decode_with() can turn both off; token_to_piece() pieces are never altered,
// so a continuation (streamed output) is the concatenation of its pieces.
// A literal U+2581 in SentencePiece input decodes as a space (as in llama.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ns::gguf {
class GgufFile;
}

namespace ns {

// Token kinds as GGUF's tokenizer.ggml.token_type stores them.
enum class TokenType : int32_t {
  undefined = 0,
  normal = 1,
  unknown = 2,
  control = 3,
  user_defined = 4,
  unused = 5,
  byte = 6
};

// Everything a tokenizer is built from, as plain data: the tokenizer.* keys of
// a GGUF file (from_gguf fills it; tests build small vocabularies by hand).
// Absent optionals take the defaults llama.cpp uses for the model type.
struct VocabSpec {
  std::string model;                 // tokenizer.ggml.model: "llama" or "gpt2"
  std::string pre;                   // tokenizer.ggml.pre; "" = "default"
  std::vector<std::string> tokens;   // tokenizer.ggml.tokens
  std::vector<float> scores;         // tokenizer.ggml.scores; empty = all 0
  std::vector<int32_t> token_types;  // tokenizer.ggml.token_type; empty = all normal
  std::vector<std::string> merges;   // tokenizer.ggml.merges ("left right", rank = index)
  std::optional<int64_t> bos_id, eos_id, eot_id, eom_id, unk_id, sep_id, pad_id, mask_id;
  std::optional<int64_t> fim_pre_id, fim_suf_id, fim_mid_id, fim_pad_id, fim_rep_id, fim_sep_id;
  std::optional<bool> add_bos, add_eos, add_space_prefix;
  std::string model_name;  // general.name (llama.cpp keys a Phi-3 quirk on it)

  static VocabSpec from_gguf(const gguf::GgufFile& file);
};

struct DecodeOptions {
  bool render_special = false;      // control/unknown tokens give their text instead of ""
  bool strip_leading_space = true;  // as the vocabulary's add_space_prefix says (see above)
  bool clean_spaces = true;         // as the vocabulary's pre-tokenizer says (see above)
};

class Tokenizer {
 public:
  static std::unique_ptr<Tokenizer> from_gguf(const gguf::GgufFile& file);
  // Throws ns::Error(bad_model) like from_gguf, naming the VocabSpec field.
  static std::unique_ptr<Tokenizer> from_spec(const VocabSpec& spec);
  virtual ~Tokenizer() = default;

  // add_special: prepend BOS / append EOS as the metadata's add_bos_token/add_eos_token say.
  // parse_special: text matching a control token's text becomes that token.
  // User-defined tokens (type 4) are matched whatever parse_special says, as in
  // llama.cpp (DeepSeek vocabularies rely on this for characters like 'ü').
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const = 0;

  // The bytes a token contributes to output text (byte tokens decoded, SPM's
  // U+2581 turned into spaces, BPE's byte-to-unicode mapping undone). Control
  // tokens give "" unless render_special.
  virtual std::string token_to_piece(int32_t id, bool render_special = false) const = 0;
  virtual std::string decode(std::span<const int32_t> ids, bool render_special = false) const = 0;
  virtual std::string decode_with(std::span<const int32_t> ids, const DecodeOptions& options) const = 0;

  virtual int32_t n_vocab() const = 0;
  virtual int32_t bos() const = 0;  // -1 if none
  virtual int32_t eos() const = 0;  // -1 if none
  virtual int32_t eot() const = 0;  // -1 if none (end of turn: <|eot_id|>, <|im_end|>, ...)
  virtual int32_t unk() const = 0;  // -1 if none
  virtual int32_t pad() const = 0;  // -1 if none
  virtual bool add_bos() const = 0;
  virtual bool add_eos() const = 0;
  virtual bool is_end_of_generation(int32_t id) const = 0;         // EOS, EOT and similar
  virtual std::vector<int32_t> end_of_generation_ids() const = 0;  // sorted
  virtual bool is_control(int32_t id) const = 0;                   // control or unknown: hidden unless render_special
  virtual TokenType token_type(int32_t id) const = 0;
  virtual const std::string& token_text(int32_t id) const = 0;  // raw vocabulary entry
  virtual int32_t find_token(std::string_view text) const = 0;  // exact vocabulary entry, -1 if none
};

}  // namespace ns
