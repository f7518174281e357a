// nightshift: the command-line tool. Commands are registered by area
// (generation_commands.cpp, queue_commands.cpp); errors are caught here, at
// one boundary, and turned into a message and an exit code.
#include <spdlog/spdlog.h>

#include <iostream>

#include "daemon/cli/commands.h"
#include "engine/util/error.h"

int main(int argc, char** argv) {
  CLI::App app{"nightshift: offline batch generation with large MoE models streamed from NVMe.\n"
               "Submit jobs to the SQLite queue that nightshiftd works through, or run one directly.",
               "nightshift"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "nightshift 0.1.0");
  spdlog::set_level(spdlog::level::warn);
  int exit_code = ns::cli::kOk;
  ns::cli::add_generation_commands(app, exit_code);
  ns::cli::add_queue_commands(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : ns::cli::kUsage;
  } catch (const ns::Error& e) {
    std::cerr << "nightshift: error: " << e.what() << "\n";
    switch (e.kind()) {
      case ns::ErrorKind::invalid_input:
      case ns::ErrorKind::bad_model:
        return ns::cli::kInvalidInput;
      default:
        return ns::cli::kFailure;
    }
  } catch (const std::exception& e) {
    std::cerr << "nightshift: error: " << e.what() << "\n";
    return ns::cli::kFailure;
  }
  return exit_code;
}
