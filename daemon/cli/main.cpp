// nightshift: the command-line tool. Commands are registered by area
// (generation_commands.cpp, queue_commands.cpp); errors are caught here, at
// one boundary, and turned into a message and an exit code.
#include <spdlog/spdlog.h>

#include <iostream>

#include "daemon/cli/chat_command.h"
#include "daemon/cli/commands.h"
#include "daemon/cli/completion_command.h"
#include "daemon/cli/migrate_queue_command.h"
#include "daemon/cli/run_batch_command.h"
#include "common/error.h"

int main(int argc, char** argv) {
  CLI::App app{
      "nightshift: offline batch generation with large MoE models streamed from NVMe.\n"
      "Submit jobs to the SQLite queue that nightshiftd works through, or run one directly.",
      "nightshift"};
  app.require_subcommand(1);
  app.footer(
      "Workflows (each command has --help with examples):\n"
      "  one prompt now:        nightshift run --model model.gguf \"Once upon a time\"\n"
      "  queue a prompt:        nightshift submit --model k2 \"Continue this...\"\n"
      "  a JSONL batch:         nightshift submit --jsonl requests.jsonl --model k2\n"
      "                         nightshift export --batch requests --jsonl results.jsonl\n"
      "  ... in one command:    nightshift run-batch -i requests.jsonl -o results.jsonl --model model.gguf\n"
      "  a folder of documents: nightshift submit --dir ~/notes --model k2\n"
      "                         nightshift export --dir ~/notes-continued\n"
      "  progress:              nightshift status / nightshift watch\n"
      "  move to PostgreSQL:    nightshift migrate-queue --from queue.db --to postgresql://host/db\n"
      "Guides: docs/ (batch-jsonl.md, nightly-continuation.md, watching-progress.md, browsing-results.md).\n"
      "Exit codes: 0 ok, 1 failure, 2 usage, 3 not found, 4 invalid input.");
  app.set_version_flag("--version", std::string("nightshift ") + NS_VERSION);
  spdlog::set_level(spdlog::level::warn);
  int exit_code = ns::cli::kOk;
  ns::cli::add_generation_commands(app, exit_code);
  ns::cli::add_queue_commands(app, exit_code);
  ns::cli::add_workflow_commands(app, exit_code);
  ns::cli::add_migrate_queue_command(app, exit_code);
  ns::cli::add_run_batch_command(app, exit_code);
  ns::cli::add_chat_command(app, exit_code);
  ns::cli::add_completion_command(app, exit_code);  // last: it lists the commands above
  // A mistyped command is named as such (CLI11 alone says "A subcommand is required").
  if (argc > 1 && argv[1][0] != '-') {
    std::string names;
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      names += (names.empty() ? "" : ", ") + sub->get_name();
      known = known || sub->check_name(argv[1]);
    }
    if (!known) {
      std::cerr << "nightshift: unknown command '" << argv[1] << "' (commands: " << names
                << "); nightshift --help describes them\n";
      return ns::cli::kUsage;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : ns::cli::kUsage;
  } catch (const ns::Error& e) {
    std::cerr << "nightshift: error: " << e.what() << "\n";
    switch (e.kind()) {
      case ns::ErrorKind::invalid_input:
      case ns::ErrorKind::bad_model: return ns::cli::kInvalidInput;
      default: return ns::cli::kFailure;
    }
  } catch (const std::exception& e) {
    std::cerr << "nightshift: error: " << e.what() << "\n";
    return ns::cli::kFailure;
  }
  return exit_code;
}
