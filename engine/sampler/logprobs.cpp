#include "engine/sampler/logprobs.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace ns::sampler {
namespace {

// Descending logit, ties by lower id: the order the sampler ranks tokens in.
constexpr auto ranks_before = [](const TokenLogprob& a, const TokenLogprob& b) {
  return a.logprob > b.logprob || (a.logprob == b.logprob && a.id < b.id);
};

constexpr char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint32_t get_u32(const std::string& in, size_t& at) {
  if (at + 4 > in.size()) throw std::invalid_argument("logprobs record cut short at byte " + std::to_string(at));
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(in[at + i])) << (8 * i);
  at += 4;
  return v;
}

std::string to_base64(const std::string& bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t v = static_cast<uint32_t>(static_cast<uint8_t>(bytes[i])) << 16;
    if (i + 1 < bytes.size()) v |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[i + 1])) << 8;
    if (i + 2 < bytes.size()) v |= static_cast<uint8_t>(bytes[i + 2]);
    out.push_back(kBase64[(v >> 18) & 63]);
    out.push_back(kBase64[(v >> 12) & 63]);
    out.push_back(i + 1 < bytes.size() ? kBase64[(v >> 6) & 63] : '=');
    out.push_back(i + 2 < bytes.size() ? kBase64[v & 63] : '=');
  }
  return out;
}

std::string from_base64(const std::string& text) {
  if (text.size() % 4 != 0) throw std::invalid_argument("logprobs text is not base64 (length not a multiple of 4)");
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    uint32_t v = 0;
    int pad = 0;
    for (size_t j = 0; j < 4; ++j) {
      const char c = text[i + j];
      const char* at = c == '=' ? nullptr : std::strchr(kBase64, c);
      if (c == '=' && i + 4 == text.size() && j >= 2) {
        ++pad;
      } else if (at == nullptr || c == '\0' || pad > 0) {
        throw std::invalid_argument("logprobs text is not base64 (character " + std::to_string(i + j) + ")");
      }
      v = (v << 6) | static_cast<uint32_t>(at ? at - kBase64 : 0);
    }
    out.push_back(static_cast<char>((v >> 16) & 0xff));
    if (pad < 2) out.push_back(static_cast<char>((v >> 8) & 0xff));
    if (pad < 1) out.push_back(static_cast<char>(v & 0xff));
  }
  return out;
}

}  // namespace

LogprobRecorder::LogprobRecorder(int32_t top_k, int32_t vocab_size)
    : k_(std::clamp(top_k, 0, std::max(0, vocab_size))), vocab_(vocab_size) {
  row_.resize(static_cast<size_t>(std::max(0, vocab_size)));
  top_.reserve(static_cast<size_t>(k_));
}

void LogprobRecorder::observe(std::span<const float> logits) {
  if (logits.size() != row_.size())
    throw std::invalid_argument("logprobs: a row of " + std::to_string(logits.size()) + " logits for a vocabulary of " +
                                std::to_string(vocab_));
  std::copy(logits.begin(), logits.end(), row_.begin());
  float max = -std::numeric_limits<float>::infinity();
  for (const float l : row_) max = std::max(max, l);
  double z = 0;
  for (const float l : row_) z += std::exp(static_cast<double>(l) - max);
  log_z_ = static_cast<double>(max) + std::log(z);
  // The top k by a heap whose front is the worst kept (ranked on the raw logit).
  top_.clear();
  const size_t k = static_cast<size_t>(k_);
  for (size_t i = 0; i < row_.size() && k > 0; ++i) {
    const TokenLogprob t{static_cast<int32_t>(i), row_[i]};
    if (top_.size() < k) {
      top_.push_back(t);
      std::push_heap(top_.begin(), top_.end(), ranks_before);
    } else if (ranks_before(t, top_.front())) {
      std::pop_heap(top_.begin(), top_.end(), ranks_before);
      top_.back() = t;
      std::push_heap(top_.begin(), top_.end(), ranks_before);
    }
  }
  std::sort_heap(top_.begin(), top_.end(), ranks_before);
  for (TokenLogprob& t : top_) t.logprob = static_cast<float>(static_cast<double>(t.logprob) - log_z_);
}

void LogprobRecorder::append(int32_t chosen, ChoiceLogprobs& out) const {
  if (chosen < 0 || chosen >= vocab_)
    throw std::invalid_argument("logprobs: token " + std::to_string(chosen) + " is outside the vocabulary");
  out.k = k_;
  out.entries.push_back({chosen, static_cast<float>(static_cast<double>(row_[static_cast<size_t>(chosen)]) - log_z_)});
  out.entries.insert(out.entries.end(), top_.begin(), top_.end());
}

std::string encode_logprobs(std::span<const ChoiceLogprobs> choices, const TokenPieces* pieces) {
  if (choices.empty()) return "";
  std::string bytes;
  put_u32(bytes, static_cast<uint32_t>(choices[0].k));
  put_u32(bytes, static_cast<uint32_t>(choices.size()));
  for (const ChoiceLogprobs& c : choices) {
    if (c.k != choices[0].k) throw std::invalid_argument("logprobs: choices recorded with different top_logprobs");
    put_u32(bytes, static_cast<uint32_t>(c.tokens()));
    for (const TokenLogprob& e : c.entries) {
      put_u32(bytes, static_cast<uint32_t>(e.id));
      put_u32(bytes, std::bit_cast<uint32_t>(e.logprob));
    }
  }
  if (pieces != nullptr) {
    put_u32(bytes, static_cast<uint32_t>(pieces->size()));
    for (const auto& [id, text] : *pieces) {
      put_u32(bytes, static_cast<uint32_t>(id));
      put_u32(bytes, static_cast<uint32_t>(text.size()));
      bytes += text;
    }
  }
  return to_base64(bytes);
}

std::vector<ChoiceLogprobs> decode_logprobs(const std::string& text, TokenPieces* pieces) {
  std::vector<ChoiceLogprobs> out;
  if (text.empty()) return out;
  const std::string bytes = from_base64(text);
  size_t at = 0;
  const uint32_t k = get_u32(bytes, at);
  const uint32_t n = get_u32(bytes, at);
  if (k > static_cast<uint32_t>(kMaxTopLogprobs))
    throw std::invalid_argument("logprobs record with top_logprobs " + std::to_string(k));
  if (n > (bytes.size() - at) / 4)
    throw std::invalid_argument("logprobs record claims " + std::to_string(n) + " choices");
  out.resize(n);
  for (ChoiceLogprobs& c : out) {
    c.k = static_cast<int32_t>(k);
    const uint64_t tokens = get_u32(bytes, at);
    const uint64_t entries = tokens * (k + 1);
    if (entries * 8 > bytes.size() - at)
      throw std::invalid_argument("logprobs record claims " + std::to_string(tokens) + " tokens, more than it holds");
    c.entries.resize(static_cast<size_t>(entries));
    for (TokenLogprob& e : c.entries) {
      e.id = static_cast<int32_t>(get_u32(bytes, at));
      e.logprob = std::bit_cast<float>(get_u32(bytes, at));
    }
  }
  if (at < bytes.size()) {  // the token texts of a result
    const uint32_t count = get_u32(bytes, at);
    for (uint32_t i = 0; i < count; ++i) {
      const auto id = static_cast<int32_t>(get_u32(bytes, at));
      const uint32_t len = get_u32(bytes, at);
      if (len > bytes.size() - at) throw std::invalid_argument("logprobs record: a token text runs past the end");
      if (pieces != nullptr) (*pieces)[id] = bytes.substr(at, len);
      at += len;
    }
  }
  if (at != bytes.size())
    throw std::invalid_argument("logprobs record has " + std::to_string(bytes.size() - at) + " bytes left over");
  return out;
}

}  // namespace ns::sampler
