// nightshift completion bash (daemon/cli/completion_command.h).
#include "daemon/cli/completion_command.h"

#include <iostream>
#include <memory>
#include <string>

#include "daemon/cli/command_support.h"
#include "daemon/cli/commands.h"
#include "daemon/lib/bash_completion.h"

namespace ns::cli {

void add_completion_command(CLI::App& app, int& exit_code) {
  auto shell = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("completion",
                                     "Print the shell completion script for nightshift's commands, flags and choices");
  cmd->add_option("shell", *shell, "the shell (bash)")->required()->check(CLI::IsMember({"bash"}));
  cmd->footer(
      "Examples:\n"
      "  source <(nightshift completion bash)                  # this shell\n"
      "  nightshift completion bash > ~/.local/share/bash-completion/completions/nightshift\n"
      "`cmake --install` puts it in share/bash-completion/completions/ already.\n"
      "Exit status: 0 printed, 2 bad command line (a shell other than bash).\n");
  cmd->callback([&app, &exit_code] {
    run_command("completion", exit_code, [&] { std::cout << daemon::bash_completion(app, "nightshift"); });
  });
}

}  // namespace ns::cli
