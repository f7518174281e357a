// The built-in byte-level BPE vocabulary: merges learned from a short English
// text with the classic BPE training loop (count adjacent pairs within words,
// merge the most frequent, repeat), so the tokens look like a real
// vocabulary's: " the", "ing", " and", ...
#include <array>
#include <map>
#include <string_view>

#include "engine/gguf/gguf_writer.h"
#include "engine/tokenizer/utf8.h"
#include "common/error.h"
#include "tools/make_model/vocabulary.h"

namespace ns::make_model {
namespace {

// Plain English about an ordinary subject, written for this purpose. Changing
// it changes the vocabulary of every model generated without --vocab.
constexpr std::string_view kTrainingText = R"(
The bakery on the corner opens before the rest of the street is awake. In the hour before dawn the ovens are
already hot, and the first trays of bread go in while the baker writes the orders for the day on a board by the
door. She has worked the night shift for many years, and she says that the quiet is the best part of the job.
There is time to think, time to plan, and time to notice the small things that go wrong before they become large
things. When the flour is damp, the dough rises slowly; when the room is warm, it rises too fast and must be
folded again. A good baker learns to read these signs the way a sailor reads the weather.

Most of the work is the same every night. The starter is fed, the dough is mixed and weighed, the loaves are
shaped and left to rest, and then they are baked and cooled on the long racks near the window. What changes is
the order in which things happen, and that depends on the people who will come in the morning. The school
across the road wants rolls for the children. The hotel wants croissants for its guests. The old man who lives
above the shop wants one small loaf of rye, and he has asked for the same loaf every day for twenty years.

The baker keeps a notebook for each of them. In it she writes what they ordered, what they liked, and what they
said when something was not quite right. She reads the notebook at the start of every shift, because she
believes that a business is only as good as its memory. Her assistant, who is younger and quicker with numbers,
once offered to put the notebook into a computer. She agreed, on the condition that the computer would never
lose a page, and that it would print the orders in the same order that she would have written them herself.

The computer now sits on a shelf next to the flour. Every evening it collects the orders that people send
during the day, sorts them by the time they are needed, and prints a list for the night. The baker still reads
the list aloud, one line at a time, and she still makes her own notes in the margin. She does not trust a
machine to know that the hotel always forgets to order enough bread on a Sunday, or that the school will be
closed next week for the holiday. Those things are written in her hand, and she checks them twice.

When the sun comes up the first customers arrive. They are tired and hungry, and they want their bread warm.
The baker hands it over the counter, takes their money, and asks about their day. Some of them have been
coming for so long that she knows their children by name. Others are new to the neighborhood and are still
learning where everything is. She treats them all the same way: with patience, with a smile, and with a loaf
that was made for them while they were sleeping.

At noon the shop closes, the ovens are turned off, and the floor is swept. The assistant counts the money and
writes the totals in the book. The baker goes home, eats a late breakfast, and sleeps through the afternoon.
In the evening she wakes, reads the new list, and walks back to the shop through the empty streets. It is not
an easy life, she says, but it is a good one, and there is nothing she would rather be doing at three in the
morning than making bread for people she will see at seven.
)";

// GPT-2's byte order: printable Latin-1 bytes first (they stand for themselves),
// then the others, which are mapped to U+0100 onwards.
struct ByteOrder {
  std::array<uint8_t, 256> byte_of_id{};  // token id -> byte
  std::array<uint32_t, 256> codepoint{};  // byte -> code point of its text
  ByteOrder() {
    std::array<bool, 256> printable{};
    for (int b = '!'; b <= '~'; ++b) printable[b] = true;
    for (int b = 0xA1; b <= 0xAC; ++b) printable[b] = true;
    for (int b = 0xAE; b <= 0xFF; ++b) printable[b] = true;
    int id = 0;
    for (int b = 0; b < 256; ++b)
      if (printable[b]) {
        byte_of_id[id++] = static_cast<uint8_t>(b);
        codepoint[b] = static_cast<uint32_t>(b);
      }
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b)
      if (!printable[b]) {
        byte_of_id[id++] = static_cast<uint8_t>(b);
        codepoint[b] = next++;
      }
  }
};

const ByteOrder& byte_order() {
  static const ByteOrder order;
  return order;
}

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_other(char c) { return !is_space(c) && !is_letter(c) && !is_digit(c); }

// GPT-2's pre-tokenizer pattern, for ASCII text:
// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
std::vector<std::string_view> pre_tokenize(std::string_view text) {
  std::vector<std::string_view> words;
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    const size_t start = i;
    if (text[i] == '\'') {
      for (std::string_view c : {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"})
        if (text.substr(i, c.size()) == c) {
          i += c.size();
          break;
        }
      if (i != start) {
        words.push_back(text.substr(start, i - start));
        continue;
      }
    }
    size_t j = i;
    if (text[j] == ' ' && j + 1 < n && !is_space(text[j + 1])) ++j;
    if (!is_space(text[j])) {
      bool (*same_class)(char) = is_letter(text[j]) ? is_letter : is_digit(text[j]) ? is_digit : is_other;
      while (j < n && same_class(text[j])) ++j;
    } else {
      while (j < n && is_space(text[j])) ++j;
      if (j < n && j - i > 1) --j;  // leave the last space to prefix the next word
    }
    words.push_back(text.substr(start, j - start));
    i = j;
  }
  return words;
}

}  // namespace

std::string byte_to_unicode(uint8_t b) { return tok::utf8_encode(byte_order().codepoint[b]); }

Vocabulary builtin_vocabulary(const std::string& pre) {
  const ByteOrder& order = byte_order();
  std::vector<std::string> tokens;
  std::map<std::string, int32_t> token_id;
  std::array<int32_t, 256> id_of_byte{};
  for (int id = 0; id < 256; ++id) {
    const uint8_t b = order.byte_of_id[id];
    tokens.push_back(byte_to_unicode(b));
    token_id[tokens.back()] = id;
    id_of_byte[b] = id;
  }

  // Distinct words with their counts, as sequences of token ids.
  std::map<std::string_view, int64_t> word_count;
  for (std::string_view w : pre_tokenize(kTrainingText)) ++word_count[w];
  std::vector<std::pair<std::vector<int32_t>, int64_t>> words;
  for (const auto& [w, count] : word_count) {
    std::vector<int32_t> ids;
    for (unsigned char c : w) ids.push_back(id_of_byte[c]);
    words.push_back({std::move(ids), count});
  }

  // Pair counts are kept up to date incrementally: a merge only touches the words that contain its pair.
  std::map<std::pair<int32_t, int32_t>, int64_t> pair_count;
  auto count_pairs = [&](const std::vector<int32_t>& ids, int64_t count) {
    for (size_t k = 0; k + 1 < ids.size(); ++k) {
      auto it = pair_count.emplace(std::make_pair(ids[k], ids[k + 1]), 0).first;
      if ((it->second += count) == 0) pair_count.erase(it);
    }
  };
  for (const auto& [ids, count] : words) count_pairs(ids, count);

  std::vector<std::string> merges;
  while (merges.size() < kBuiltinMerges) {
    // The most frequent pair whose text is new; ties go to the lowest ids (map order).
    std::pair<int32_t, int32_t> best{-1, -1};
    int64_t best_count = 0;
    for (const auto& [p, count] : pair_count)
      if (count > best_count && !token_id.count(tokens[p.first] + tokens[p.second])) {
        best = p;
        best_count = count;
      }
    if (best_count < 2)
      throw Error(ErrorKind::internal, "the built-in training text yields only " + std::to_string(merges.size()) +
                                           " merges; it needs more text");
    const auto new_id = static_cast<int32_t>(tokens.size());
    merges.push_back(tokens[best.first] + " " + tokens[best.second]);
    tokens.push_back(tokens[best.first] + tokens[best.second]);
    token_id[tokens.back()] = new_id;
    for (auto& [ids, count] : words) {
      bool has_pair = false;
      for (size_t k = 0; k + 1 < ids.size() && !has_pair; ++k)
        has_pair = ids[k] == best.first && ids[k + 1] == best.second;
      if (!has_pair) continue;
      count_pairs(ids, -count);
      std::vector<int32_t> merged;
      for (size_t k = 0; k < ids.size(); ++k) {
        if (k + 1 < ids.size() && ids[k] == best.first && ids[k + 1] == best.second) {
          merged.push_back(new_id);
          ++k;
        } else {
          merged.push_back(ids[k]);
        }
      }
      ids = std::move(merged);
      count_pairs(ids, count);
    }
  }

  constexpr int32_t kNormal = 1, kControl = 3;  // llama_token_type
  std::vector<int32_t> types(tokens.size(), kNormal);
  const auto bos = static_cast<int32_t>(tokens.size());
  tokens.push_back("<|bos|>");
  types.push_back(kControl);
  const auto eos = static_cast<int32_t>(tokens.size());
  tokens.push_back("<|eos|>");
  types.push_back(kControl);

  using namespace gguf;
  Vocabulary v;
  v.n_vocab = static_cast<uint32_t>(tokens.size());
  v.source = "built-in byte-level BPE (" + std::to_string(v.n_vocab) + " tokens, " + std::to_string(merges.size()) +
             " merges" + (pre == kBuiltinPre ? std::string() : ", pre-tokenizer " + pre) + ")";
  v.metadata = {
      {"tokenizer.ggml.model", val::str("gpt2")},
      {"tokenizer.ggml.pre", val::str(pre)},
      {"tokenizer.ggml.tokens", val::string_array(tokens)},
      {"tokenizer.ggml.token_type", val::i32_array(types)},
      {"tokenizer.ggml.merges", val::string_array(merges)},
      {"tokenizer.ggml.bos_token_id", val::u32(static_cast<uint32_t>(bos))},
      {"tokenizer.ggml.eos_token_id", val::u32(static_cast<uint32_t>(eos))},
      {"tokenizer.ggml.add_bos_token", val::boolean(true)},
      {"tokenizer.ggml.add_eos_token", val::boolean(false)},
  };
  return v;
}

}  // namespace ns::make_model
