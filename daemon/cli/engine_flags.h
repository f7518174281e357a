// The engine's options as a command's flags (run, logits): each flag is a row
// of the engine's table (EngineOptions::for_each, engine/api/engine_options.h),
// named --kebab-case of its key, documented by its doc line and parsed as the
// config parses the key (a size needs a unit, a choice is one of its names).
//
// Contract: add_engine_flag binds the flag to a member of `o`, which must
// outlive the parse; an unknown option name is a programming error (throws
// std::logic_error at start-up, so every command's test catches it).
#pragma once

#include <CLI/CLI.hpp>

#include <stdexcept>
#include <string>
#include <type_traits>

#include "engine/engine.h"

namespace ns::cli {

// `alias`: a short flag beside the long one ("-t"), or "".
inline void add_engine_flag(CLI::App* cmd, EngineOptions& o, const std::string& name, const std::string& alias = "") {
  bool found = false;
  EngineOptions::for_each(o, [&](auto& member, const OptionInfo& info) {
    if (name != info.name) return;
    found = true;
    using T = std::decay_t<decltype(member)>;
    std::string flag = "--" + name;
    for (char& c : flag) c = c == '_' ? '-' : c;
    if (!alias.empty()) flag += "," + alias;
    CLI::Option* opt = nullptr;
    if constexpr (std::is_same_v<T, bool>) {  // on | off, as the commands always spelled it
      opt = cmd->add_option_function<std::string>(flag, [&member](const std::string& v) { member = v == "on"; },
                                                   info.doc)
                ->check(CLI::IsMember({"on", "off"}))
                ->default_str(member ? "on" : "off");
    } else if constexpr (std::is_same_v<T, uint64_t>) {  // a size: 8GiB
      const std::string key = flag.substr(0, flag.find(','));
      opt = cmd->add_option_function<std::string>(
                   flag, [&member, key](const std::string& v) { member = parse_option_bytes(key, v); }, info.doc)
                ->check(CLI::Validator(
                    [key](std::string& v) {
                      try {
                        parse_option_bytes(key, v);
                        return std::string();
                      } catch (const Error& e) {
                        return std::string(e.what());
                      }
                    },
                    "SIZE"))
                ->default_str(option_text(member));
    } else if constexpr (std::is_integral_v<T>) {
      opt = cmd->add_option(flag, member, info.doc)->check(CLI::Range(info.min, info.max))->capture_default_str();
    } else if constexpr (std::is_same_v<T, std::string>) {
      opt = cmd->add_option(flag, member, info.doc)->capture_default_str();
    } else {  // a Choice: io_mode, cache_policy
      opt = cmd->add_option_function<std::string>(flag, [&member](const std::string& v) { member = T::parse(v); },
                                                   info.doc)
                ->check(CLI::IsMember(std::vector<std::string>(T::kNames.begin(), T::kNames.end())))
                ->default_str(member.name());
    }
    (void)opt;
  });
  if (!found) throw std::logic_error("add_engine_flag: no engine option named " + name);
}

}  // namespace ns::cli
