// nightshift chat render (daemon/cli/chat_command.h). The template is a file
// or a GGUF's tokenizer.chat_template; bos_token and eos_token default to the
// model's vocabulary tokens (empty with --template). A template that raises
// exits 4 (invalid input) with its message, through main's error boundary.
#include "daemon/cli/chat_command.h"

#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "common/error.h"
#include "engine/chat/chat_messages_json.h"
#include "engine/engine.h"

namespace ns::cli {
namespace {

struct ChatRenderArgs {
  std::string template_file, model, messages_file, tools_file;
  bool add_generation_prompt = true;
  std::optional<std::string> bos, eos;
};

std::string read_text(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::invalid_input, path + ": cannot read the " + what + " file");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::ordered_json read_json(const std::string& path, const char* what) {
  try {
    return nlohmann::ordered_json::parse(read_text(path, what));
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::invalid_input, path + ": the " + what + " file is not JSON: " + e.what());
  }
}

void chat_render_command(const ChatRenderArgs& a) {
  std::string source, bos, eos;
  if (!a.model.empty()) {
    const auto file = ModelFile::open(a.model);
    if (!file->chat_template())
      throw Error(ErrorKind::invalid_input,
                  a.model + " has no tokenizer.chat_template (a base model): pass --template");
    source = *file->chat_template();
    bos = file->bos_text();
    eos = file->eos_text();
  } else {
    source = read_text(a.template_file, "template");
  }
  if (a.bos) bos = *a.bos;
  if (a.eos) eos = *a.eos;
  nlohmann::ordered_json messages = read_json(a.messages_file, "messages");
  nlohmann::ordered_json tools;
  if (messages.is_object()) {  // {"messages": [...], "tools": [...]} as an OpenAI request body has them
    if (messages.contains("tools")) tools = messages.at("tools");
    messages = nlohmann::ordered_json(messages.value("messages", nlohmann::ordered_json::array()));
  }
  if (!messages.is_array())
    throw Error(ErrorKind::invalid_input, a.messages_file + ": expected a JSON array of messages");
  if (!a.tools_file.empty()) tools = read_json(a.tools_file, "tools");
  // The messages as a job stores them (tool calls' arguments as objects, ...), rendered as the daemon renders.
  const auto conversation = chat::parse_chat_messages(nlohmann::json::parse(messages.dump()), "messages");
  const chat::ChatPrompter prompter(a.model.empty() ? source : "",
                                    a.model.empty() ? std::nullopt : std::optional(source), bos, eos);
  // Tools as given (any array: a template may take other shapes than OpenAI's functions).
  if (!tools.is_null() && !tools.is_array()) throw Error(ErrorKind::invalid_input, "tools: expected a JSON array");
  std::cout << prompter.render(conversation, a.add_generation_prompt, tools.is_array() ? tools.dump() : "");
  std::cout.flush();
}

}  // namespace

void add_chat_command(CLI::App& app, int& exit_code) {
  auto* chat = app.add_subcommand("chat", "Chat templates: render a conversation as a model's prompt")
                   ->require_subcommand(1)
                   ->footer("Example:\n  nightshift chat render --model model.gguf --messages conversation.json");
  auto a = std::make_shared<ChatRenderArgs>();
  auto* render =
      chat->add_subcommand("render",
                           "Print the prompt a chat template's Jinja source gives for a conversation, as Hugging Face "
                           "transformers' apply_chat_template renders it (exit 4 with the template's message when it "
                           "raises)")
          ->footer(
              "Examples:\n"
              "  nightshift chat render --model model.gguf --messages conversation.json\n"
              "  nightshift chat render --template chat.jinja --messages m.json --tools tools.json "
              "--no-add-generation-prompt --bos '<s>'");
  auto* tmpl = render->add_option("--template", a->template_file, "Jinja chat template file");
  auto* model = render->add_option("--model", a->model, "GGUF model: its tokenizer.chat_template and BOS/EOS tokens");
  tmpl->excludes(model);
  model->excludes(tmpl);
  render
      ->add_option("--messages", a->messages_file,
                   "JSON file: an array of messages ({role, content, ...}), or an object with messages and tools")
      ->required();
  render->add_option("--tools", a->tools_file, "JSON file: an array of tool definitions (the template's `tools`)");
  render->add_flag("--add-generation-prompt,!--no-add-generation-prompt", a->add_generation_prompt,
                   "End with the assistant turn's opening (default: on)");
  render->add_option("--bos", a->bos, "bos_token (default: the model's BOS token text; empty with --template)");
  render->add_option("--eos", a->eos, "eos_token (default: the model's EOS token text; empty with --template)");
  render->callback([a, tmpl, model] {
    if (tmpl->count() == 0 && model->count() == 0) throw CLI::RequiredError("one of --template or --model");
    chat_render_command(*a);
  });
  (void)exit_code;
}

}  // namespace ns::cli
