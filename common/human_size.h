// Byte sizes as people write them in a config: "8GiB", "2500MiB", "3G", "1.5 GiB", "4096".
//
// Units (case-insensitive): none or B = bytes; K, M, G, T and KiB, MiB, GiB,
// TiB = powers of 1024; KB, MB, GB, TB = powers of 1000. A decimal fraction
// is allowed before a unit ("1.5GiB"); the result is rounded down to a byte.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ns {

// Throws ns::Error(invalid_input) naming the text and the accepted forms for
// anything else (empty, negative, unknown unit, over 2^64 - 1).
uint64_t parse_size(std::string_view text);

// "8.00 GiB", "2.44 MiB", "512 B": two decimals in the largest binary unit that fits.
std::string format_size(uint64_t bytes);

}  // namespace ns
