#include "engine/tokenizer/tokenizer.h"

#include <limits>

#include "engine/tokenizer/bpe_encoder.h"
#include "engine/tokenizer/byte_unicode.h"
#include "engine/tokenizer/detokenize.h"
#include "engine/tokenizer/pretokenizer.h"
#include "engine/tokenizer/spm_encoder.h"
#include "engine/tokenizer/utf8.h"
#include "engine/tokenizer/vocab.h"
#include "common/error.h"

namespace ns {

namespace {

using tok::Vocab;

constexpr std::string_view kEscapedSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space

void escape_spaces(std::string& s) {
  std::string out;
  out.reserve(s.size() + s.size() / 2);
  for (char c : s) {
    if (c == ' ')
      out += kEscapedSpace;
    else
      out.push_back(c);
  }
  s.swap(out);
}

std::string unescape_spaces(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, kEscapedSpace.size(), kEscapedSpace) == 0) {
      out.push_back(' ');
      i += kEscapedSpace.size();
    } else {
      out.push_back(s[i++]);
    }
  }
  return out;
}

// "<0xXX>" -> XX; -1 if the text is not in that form.
int parse_byte_token(const std::string& t) {
  const auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  const int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// Byte-level spelling back to bytes. A character outside the 256-character
// alphabet (only in hand-added tokens) is kept as it is; llama.cpp writes
// "[UNK_BYTE_...]" there instead.
std::string byte_decode(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const tok::DecodedChar c = tok::utf8_decode_at(text, pos);
    const int b = tok::unicode_to_byte(c.cpt);
    if (b >= 0)
      out.push_back(static_cast<char>(b));
    else
      out.append(text, pos, c.len);
    pos += c.len;
  }
  return out;
}

class VocabTokenizer final : public Tokenizer {
 public:
  explicit VocabTokenizer(const VocabSpec& spec) {
    if (spec.model == "llama") {
      vocab_ = Vocab::build(spec, tok::ModelKind::spm, /*bos=*/1, /*eos=*/2, /*unk=*/0, /*add_bos=*/true,
                            /*add_space_prefix=*/true, /*clean_spaces=*/false);
      spm_ = std::make_unique<tok::SpmEncoder>(vocab_);
    } else if (spec.model == "gpt2") {
      const tok::PreTokenizerInfo pre = tok::resolve_pre_tokenizer(spec.pre);
      // llama.cpp lets a Kimi K2 vocabulary leave its merges out; BPE then
      // merges nothing: each byte of a word stays its own token.
      if (spec.merges.empty() && pre.type != tok::PreType::kimi_k2)
        throw Error(ErrorKind::bad_model,
                    "tokenizer.ggml.merges is missing or empty: a gpt2 (BPE) vocabulary needs its merges");
      // llama.cpp's BPE defaults: BOS = EOS = 11 (when inside the vocabulary), no BOS added.
      vocab_ = Vocab::build(spec, tok::ModelKind::bpe, pre.default_bos ? 11 : -1, 11, -1, pre.add_bos.value_or(false),
                            /*add_space_prefix=*/false, pre.clean_spaces);
      bpe_ = std::make_unique<tok::BpeEncoder>(vocab_, spec.merges, pre.type, pre.ignore_merges);
    } else {
      throw Error(ErrorKind::bad_model,
                  "tokenizer.ggml.model '" + spec.model +
                      "' is not supported; supported: llama (SentencePiece), gpt2 (byte-level BPE)");
    }
    pieces_.reserve(vocab_.text.size());
    for (int32_t id = 0; id < vocab_.n(); ++id) pieces_.push_back(make_piece(id));
  }

  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const override {
    if (text.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
      throw Error(ErrorKind::invalid_input,
                  "text of " + std::to_string(text.size()) + " bytes is too long to tokenize (limit 2 GiB)");
    std::vector<int32_t> out;
    const std::vector<tok::Fragment> frags = vocab_.partition(text, parse_special);
    if (add_special && vocab_.add_bos) out.push_back(vocab_.bos);
    if (spm_) {
      // A raw fragment gets the SentencePiece space prefix when it starts the
      // text or follows a special token (llama.cpp's is_prev_special).
      bool prev_special = true;
      std::string piece;
      for (const tok::Fragment& f : frags) {
        if (f.token >= 0) {
          out.push_back(f.token);
          prev_special = true;
          continue;
        }
        piece.clear();
        if (vocab_.add_space_prefix && prev_special) piece.push_back(' ');
        piece.append(text.substr(f.offset, f.length));
        escape_spaces(piece);
        spm_->encode(piece, out);
        prev_special = false;
      }
    } else {
      for (const tok::Fragment& f : frags) {
        if (f.token >= 0)
          out.push_back(f.token);
        else
          bpe_->encode(text.substr(f.offset, f.length), out);
      }
    }
    if (add_special && vocab_.add_eos) out.push_back(vocab_.eos);
    return out;
  }

  std::string token_to_piece(int32_t id, bool render_special) const override {
    vocab_.check_id(id);
    if (!render_special && is_control(id)) return {};
    return pieces_[id];
  }

  std::string decode(std::span<const int32_t> ids, bool render_special) const override {
    DecodeOptions o;
    o.render_special = render_special;
    return decode_with(ids, o);
  }

  std::string decode_with(std::span<const int32_t> ids, const DecodeOptions& o) const override {
    std::string out;
    bool strip = o.strip_leading_space && vocab_.add_space_prefix;
    for (int32_t id : ids) {
      vocab_.check_id(id);
      const std::string& piece = (!o.render_special && is_control(id)) ? empty_ : pieces_[id];
      // Only the very first token may lose its leading space, even if it renders as "".
      const size_t skip = strip && !piece.empty() && piece[0] == ' ' ? 1 : 0;
      strip = false;
      out.append(piece, skip, std::string::npos);
    }
    if (o.clean_spaces && vocab_.clean_spaces) tok::clean_up_spaces(out);
    return out;
  }

  int32_t n_vocab() const override { return vocab_.n(); }
  int32_t bos() const override { return vocab_.bos; }
  int32_t eos() const override { return vocab_.eos; }
  int32_t eot() const override { return vocab_.eot; }
  int32_t unk() const override { return vocab_.unk; }
  int32_t pad() const override { return vocab_.pad; }
  bool add_bos() const override { return vocab_.add_bos; }
  bool add_eos() const override { return vocab_.add_eos; }
  bool is_end_of_generation(int32_t id) const override { return id >= 0 && vocab_.is_eog(id); }
  std::vector<int32_t> end_of_generation_ids() const override { return vocab_.eog; }
  bool is_control(int32_t id) const override {
    vocab_.check_id(id);
    return vocab_.attr[id] & (tok::kAttrControl | tok::kAttrUnknown);
  }
  TokenType token_type(int32_t id) const override {
    vocab_.check_id(id);
    return vocab_.declared_type[id];
  }
  const std::string& token_text(int32_t id) const override {
    vocab_.check_id(id);
    return vocab_.text[id];
  }
  int32_t find_token(std::string_view text) const override { return vocab_.find(text); }

 private:
  // The piece with specials rendered (llama.cpp's token_to_piece cache).
  std::string make_piece(int32_t id) const {
    const uint32_t a = vocab_.attr[id];
    const std::string& t = vocab_.text[id];
    if (a & (tok::kAttrControl | tok::kAttrUnknown | tok::kAttrUserDefined)) return t;
    if (a & tok::kAttrNormal) return spm_ ? unescape_spaces(t) : byte_decode(t);
    if (a & tok::kAttrByte) {
      const int b = parse_byte_token(t);
      return b < 0 ? std::string() : std::string(1, static_cast<char>(b));
    }
    return {};  // unused / undefined tokens render as nothing
  }

  Vocab vocab_;
  std::unique_ptr<tok::SpmEncoder> spm_;
  std::unique_ptr<tok::BpeEncoder> bpe_;
  std::vector<std::string> pieces_;
  const std::string empty_;
};

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_spec(const VocabSpec& spec) {
  return std::make_unique<VocabTokenizer>(spec);
}

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const gguf::GgufFile& file) {
  return from_spec(VocabSpec::from_gguf(file));
}

}  // namespace ns
