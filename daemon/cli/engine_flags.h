// The engine's options as a command's flags (run, logits): each flag is a row
// of the engine's table (EngineOptions::for_each, engine/api/engine_options.h),
// named --kebab-case of its key, documented by its doc line and parsed as the
// config parses the key (a size needs a unit, a choice is one of its names).
//
// Contract: add_engine_flag binds the flag to a member of `o`, which must
// outlive the parse, and returns it (count() > 0: given); an unknown option
// name is a programming error (throws std::logic_error at start-up, so every
// command's test catches it). EngineOverrides: flags that override a
// config's settings (run-batch) only where they are given.
#pragma once

#include <CLI/CLI.hpp>

#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/engine.h"

namespace ns::cli {

// `alias`: a short flag beside the long one ("-t"), or "".
inline CLI::Option* add_engine_flag(CLI::App* cmd, EngineOptions& o, const std::string& name,
                                    const std::string& alias = "") {
  CLI::Option* opt = nullptr;
  bool found = false;
  EngineOptions::for_each(o, [&](auto& member, const OptionInfo& info) {
    if (name != info.name) return;
    found = true;
    using T = std::decay_t<decltype(member)>;
    std::string flag = "--" + name;
    for (char& c : flag) c = c == '_' ? '-' : c;
    if (!alias.empty()) flag += "," + alias;
    if constexpr (std::is_same_v<T, bool>) {  // on | off, as the commands always spelled it
      opt = cmd->add_option_function<std::string>(
                   flag, [&member](const std::string& v) { member = v == "on"; }, info.doc)
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
      opt = cmd->add_option_function<std::string>(
                   flag, [&member](const std::string& v) { member = T::parse(v); }, info.doc)
                ->check(CLI::IsMember(std::vector<std::string>(T::kNames.begin(), T::kNames.end())))
                ->default_str(member.name());
    }
  });
  if (!found) throw std::logic_error("add_engine_flag: no engine option named " + name);
  return opt;
}

// Engine flags over settings read later (a config): `flags` holds the values
// parsed (its defaults are --help's); given() names the flags the command
// line gave, to copy over those settings (copy_engine_option).
struct EngineOverrides {
  EngineOptions flags;
  std::vector<std::pair<std::string, CLI::Option*>> added;

  void add(CLI::App* cmd, const std::string& name, const std::string& alias = "") {
    added.emplace_back(name, add_engine_flag(cmd, flags, name, alias));
  }
  // The names of the flags given on the command line.
  std::vector<std::string> given() const {
    std::vector<std::string> names;
    for (const auto& [name, opt] : added)
      if (opt->count() > 0) names.push_back(name);
    return names;
  }
};

}  // namespace ns::cli
