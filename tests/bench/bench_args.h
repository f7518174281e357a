// The command line of the benchmarks that take a command and a subject
// (ns_bench_batch, ns_bench_stream): NAME COMMAND SUBJECT [--option value]...,
// and their main(): the command's function by its name, a failure as one
// line on stderr.
#pragma once

#include <cstdio>
#include <exception>
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>

#include "common/error.h"

namespace ns::bench {

// Sets `command` and `subject` from argv[1] and argv[2], then calls
// option(key, value) for each "--key value" after them; option returns false
// for a key it does not know. Throws Error(invalid_input): `usage` when
// command or subject is missing, and naming an option without a value or
// one that option does not know.
inline void parse_command_line(int argc, char** argv, const char* usage, std::string& command, std::string& subject,
                               const std::function<bool(const std::string& key, const std::string& value)>& option) {
  if (argc < 3) throw Error(ErrorKind::invalid_input, usage);
  command = argv[1];
  subject = argv[2];
  for (int i = 3; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) throw Error(ErrorKind::invalid_input, k + " needs a value");
    if (!option(k, argv[++i])) throw Error(ErrorKind::invalid_input, "unknown option " + k);
  }
}

// The exit code of the function `commands` pairs with `command`, called with
// `args`; throws Error(invalid_input) for a command none is paired with.
template <class Args>
int run_named(const std::string& command, std::initializer_list<std::pair<const char*, int (*)(const Args&)>> commands,
              const Args& args) {
  for (const auto& [name, run] : commands) {
    if (command == name) return run(args);
  }
  throw Error(ErrorKind::invalid_input, "unknown command " + command);
}

// main()'s body: body()'s exit code, or 1 with "PROGRAM: what went wrong" on stderr when it throws.
inline int guarded_main(const char* program, const std::function<int()>& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
}

}  // namespace ns::bench
