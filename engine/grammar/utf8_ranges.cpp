#include "engine/grammar/utf8_ranges.h"

#include <algorithm>

namespace ns::grammar {

std::vector<CodepointRange> normalize(std::vector<CodepointRange> ranges) {
  std::sort(ranges.begin(), ranges.end(), [](auto a, auto b) { return a.lo < b.lo; });
  std::vector<CodepointRange> out;
  for (const CodepointRange& r : ranges) {
    if (!out.empty() && r.lo <= out.back().hi + 1)
      out.back().hi = std::max(out.back().hi, r.hi);
    else
      out.push_back(r);
  }
  return out;
}

std::vector<CodepointRange> complement(const std::vector<CodepointRange>& ranges) {
  std::vector<CodepointRange> out;
  uint32_t next = 0;
  for (const CodepointRange& r : ranges) {
    if (r.lo > next) out.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodepoint) out.push_back({next, kMaxCodepoint});
  return out;
}

namespace {

void split(uint32_t lo, uint32_t hi, std::vector<Utf8Sequence>& out) {
  if (lo > hi) return;
  if (lo <= 0xDFFF && hi >= 0xD800) {  // no surrogates
    if (lo < 0xD800) split(lo, 0xD7FF, out);
    if (hi > 0xDFFF) split(0xE000, hi, out);
    return;
  }
  for (const uint32_t max : {0x7Fu, 0x7FFu, 0xFFFFu})  // one encoded length per piece
    if (lo <= max && hi > max) {
      split(lo, max, out);
      split(max + 1, hi, out);
      return;
    }
  if (hi < 0x80) {
    out.push_back({{static_cast<uint8_t>(lo), static_cast<uint8_t>(hi)}});
    return;
  }
  // Split until every continuation byte below the first differing one spans its full 80-BF.
  const int n = hi < 0x800 ? 2 : hi < 0x10000 ? 3 : 4;
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split(lo, lo | m, out);
        split((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split(lo, (hi & ~m) - 1, out);
        split(hi & ~m, hi, out);
        return;
      }
    }
  }
  const std::string a = encode_utf8(lo), b = encode_utf8(hi);
  Utf8Sequence seq;
  for (size_t k = 0; k < a.size(); ++k) seq.push_back({static_cast<uint8_t>(a[k]), static_cast<uint8_t>(b[k])});
  out.push_back(std::move(seq));
}

}  // namespace

std::vector<Utf8Sequence> utf8_sequences(const std::vector<CodepointRange>& ranges) {
  std::vector<Utf8Sequence> out;
  for (const CodepointRange& r : ranges) split(r.lo, std::min(r.hi, kMaxCodepoint), out);
  return out;
}

}  // namespace ns::grammar
