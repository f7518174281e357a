// Text <-> token ids, from a GGUF file's tokenizer.* metadata.
//
// Supports tokenizer.ggml.model "llama" (SentencePiece-style, scores) and
// "gpt2" (byte-level BPE, merges) with the pre-tokenizers named by
// tokenizer.ggml.pre. Behaviour follows llama.cpp's vocabulary code, which
// produced the conformance vectors in ../shared/vocab.
//
// Contract: from_gguf() throws ns::Error(bad_model) naming the missing or
// malformed key, or the unsupported model/pre-tokenizer and the supported ones.
// Const methods are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ns::gguf {
class GgufFile;
}

namespace ns {

class Tokenizer {
 public:
  static std::unique_ptr<Tokenizer> from_gguf(const gguf::GgufFile& file);
  virtual ~Tokenizer() = default;

  // add_special: prepend BOS / append EOS as the metadata's add_bos_token/add_eos_token say.
  // parse_special: text matching a control/user-defined token's text becomes that token.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const = 0;

  // The bytes a token contributes to output text (byte tokens decoded, SPM's
  // U+2581 turned into spaces, BPE's byte-to-unicode mapping undone). Control
  // tokens give "" unless render_special.
  virtual std::string token_to_piece(int32_t id, bool render_special = false) const = 0;
  virtual std::string decode(std::span<const int32_t> ids, bool render_special = false) const = 0;

  virtual int32_t n_vocab() const = 0;
  virtual int32_t bos() const = 0;   // -1 if none
  virtual int32_t eos() const = 0;   // -1 if none
  virtual bool add_bos() const = 0;
  virtual bool is_end_of_generation(int32_t id) const = 0;  // EOS, EOT and similar
  virtual const std::string& token_text(int32_t id) const = 0;  // raw vocabulary entry
};

}  // namespace ns
