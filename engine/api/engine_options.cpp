#include "engine/api/engine_options.h"

#include <type_traits>

#include "common/human_size.h"

namespace ns {

std::string option_text(bool v) { return v ? "true" : "false"; }

std::string option_text(long long v) { return std::to_string(v); }

std::string option_text(uint64_t bytes) {
  // Exact, so that the text reads back to the same value (changed_keys compares texts).
  static constexpr std::array<const char*, 4> kUnits = {"TiB", "GiB", "MiB", "KiB"};
  for (size_t i = 0; i < kUnits.size(); ++i) {
    const uint64_t unit = uint64_t{1} << (10 * (kUnits.size() - i));
    if (bytes != 0 && bytes % unit == 0) return std::to_string(bytes / unit) + kUnits[i];
  }
  return bytes == 0 ? "0" : std::to_string(bytes) + "B";
}

std::string engine_option_text(const EngineOptions& o, std::string_view name) {
  std::string text;
  EngineOptions::for_each(o, [&](const auto& value, const OptionInfo& info) {
    if (name == info.name) text = option_text(value);
  });
  return text;
}

bool copy_engine_option(EngineOptions& to, const EngineOptions& from, std::string_view name) {
  bool found = false;
  EngineOptions::for_each(from, [&](const auto& source, const OptionInfo& row) {
    if (name != row.name) return;
    EngineOptions::for_each(to, [&](auto& target, const OptionInfo& other) {
      if constexpr (std::is_same_v<std::decay_t<decltype(target)>, std::decay_t<decltype(source)>>) {
        if (name == other.name) {
          target = source;
          found = true;
        }
      }
    });
  });
  return found;
}

uint64_t parse_option_bytes(std::string_view key, const std::string& v) {
  const std::string k(key);
  if (v != "0" && !v.empty() && v.find_first_not_of("0123456789") == std::string::npos) {
    throw Error(ErrorKind::invalid_input, k + ": " + v + " has no unit (it would be " + v + " bytes): write " + v +
                                              "MiB or " + v + "GiB, or 0 for what the machine has");
  }
  try {
    return v == "0" ? 0 : parse_size(v);
  } catch (const Error& e) {
    throw Error(ErrorKind::invalid_input, k + ": " + e.what());
  }
}

}  // namespace ns
