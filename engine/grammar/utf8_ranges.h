// Unicode code point ranges as UTF-8 byte-range sequences (RE2's and Rust
// regex-syntax's construction): [U+0080, U+07FF] is the single sequence
// [C2-DF][80-BF]; every range splits into at most a few such sequences, each
// matching exactly the UTF-8 encodings of its code points. Surrogates
// (U+D800..U+DFFF) are left out: UTF-8 cannot encode them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/utf8.h"

namespace ns::grammar {

constexpr uint32_t kMaxCodepoint = 0x10FFFF;

struct CodepointRange {
  uint32_t lo, hi;  // inclusive
};
struct ByteRange {
  uint8_t lo, hi;  // inclusive
};
using Utf8Sequence = std::vector<ByteRange>;  // 1 to 4 byte ranges

// Sorted, overlaps and neighbours merged.
std::vector<CodepointRange> normalize(std::vector<CodepointRange> ranges);
// Everything in [0, kMaxCodepoint] not in `ranges` (normalized).
std::vector<CodepointRange> complement(const std::vector<CodepointRange>& ranges);
std::vector<Utf8Sequence> utf8_sequences(const std::vector<CodepointRange>& ranges);

// One character each way, shared with the queue and the tests: common/utf8.h.
using ns::decode_utf8;
using ns::encode_utf8;

}  // namespace ns::grammar
