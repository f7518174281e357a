// Bash completion generated from a CLI11 app's own option table (issue 19):
// subcommands (nested ones too, e.g. `model info`), every flag and option of
// each, and the fixed choices of options checked with CLI::IsMember (e.g.
// `list --state`). Nothing is kept by hand, so a new flag completes the day it
// is added. Options that take a value and have no fixed choices fall back to
// file names (`complete -o default`), as do positional arguments.
//
//   nightshift completion bash > /usr/local/share/bash-completion/completions/nightshift
//   nightshiftd --bash-completion > /usr/local/share/bash-completion/completions/nightshiftd
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace ns::daemon {

// The script: one function _<program> and its `complete` line. `program`
// is the command name as typed (nightshift, nightshiftd).
std::string bash_completion(CLI::App& app, const std::string& program);

}  // namespace ns::daemon
