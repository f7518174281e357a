// nightshift chat render: a conversation rendered through a chat template's
// own Jinja source (engine/chat/jinja.h), printed as the prompt text
// (daemon/cli/chat_command.cpp).
#pragma once

#include <CLI/CLI.hpp>

namespace ns::cli {

void add_chat_command(CLI::App& app, int& exit_code);

}  // namespace ns::cli
