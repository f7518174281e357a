// Tool calls parsed back out of generated text (engine/chat/tool_calls.h).
//
// The round trip is the key check: for each family's real chat template in
// ../shared/chat-templates/templates, a conversation ending in an assistant
// message with tool_calls is rendered by our Jinja engine with and without that
// message (the shorter one with the generation prompt); what the message added
// after the generation prompt is what the model would have generated, and
// parse_reply must give the same calls back. Templates are read in place; the
// test skips with a message where ../shared is absent.
#include <doctest/doctest.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "engine/chat/jinja.h"
#include "engine/chat/tool_calls.h"
#include "tests/unit/chat/template_files.h"

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;
using ns::chat::parse_reply;
using ns::chat::ParsedReply;
using ns::chat::tool_call_format;
using ns::chat::ToolCallFormat;

namespace {

const fs::path kTemplates = fs::path(NS_SHARED_DIR) / "chat-templates" / "templates";
using ns::test::read_file;

// The 2026 families' templates that only the reference's checkout has
// (reference_templates_test.cpp renders them); those rows skip without it.
fs::path reference_templates() {
  const char* env = std::getenv("NS_REF_TEMPLATES_DIR");
  return env ? env : "/var/tmp/ns-reference/llama.cpp/models/templates";
}

const ordered_json kTools = ordered_json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Current weather",
    "parameters": {"type": "object", "properties": {"location": {"type": "string"}, "unit": {"type": "string"}},
                   "required": ["location"]}}},
  {"type": "function", "function": {"name": "search", "description": "Search the web",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"},
                   "filters": {"type": "object"}, "safe": {"type": "boolean"}}}}}
])");

// The calls the assistant message makes: a plain one, and one with UTF-8, a
// number, a nested object and a boolean.
const ordered_json kCalls = ordered_json::parse(R"([
  {"id": "call_a", "type": "function",
   "function": {"name": "get_weather", "arguments": {"location": "Paris", "unit": "celsius"}}},
  {"id": "call_b", "type": "function",
   "function": {"name": "search", "arguments": {"query": "café ☕ 東京", "limit": 5,
                                                "filters": {"lang": ["en", "fr"]}, "safe": true}}}
])");

const ordered_json kHistory = ordered_json::parse(R"([
  {"role": "system", "content": "You are a helpful assistant."},
  {"role": "user", "content": "What is the weather in Paris?"}
])");

constexpr const char* kReasoning = "The user wants the weather; I should call get_weather.";
constexpr const char* kContent = "Let me look that up.";

struct Family {
  const char* file;
  ToolCallFormat format;
  size_t calls;               // how many of kCalls the template renders (gpt-oss: one per message)
  bool kimi_ids;              // ids are functions.NAME:IDX
  bool content_is_reasoning;  // gpt-oss renders a tool-calling message's content in the analysis channel
};

const Family kFamilies[] = {
    {"moonshotai-Kimi-K2.jinja", ToolCallFormat::kimi_k2, 2, true, false},
    {"Kimi-K2-Instruct.jinja", ToolCallFormat::kimi_k2, 2, true, false},
    {"Kimi-K3.jinja", ToolCallFormat::kimi_k3, 2, false, false},
    {"deepseek-ai-DeepSeek-V3.1.jinja", ToolCallFormat::deepseek_v3, 2, false, false},
    {"deepseek-ai-DeepSeek-V3.2.jinja", ToolCallFormat::deepseek_dsml, 2, false, false},
    {"deepseek-ai-DeepSeek-V4.jinja", ToolCallFormat::deepseek_dsml, 2, false, false},
    {"Qwen-Qwen3-0.6B.jinja", ToolCallFormat::hermes_json, 2, false, false},
    {"Qwen-Qwen2.5-7B-Instruct.jinja", ToolCallFormat::hermes_json, 2, false, false},
    {"Qwen3.5-4B.jinja", ToolCallFormat::qwen35_xml, 2, false, false},
    {"GLM-4.6.jinja", ToolCallFormat::glm45, 2, false, false},
    {"openai-gpt-oss-120b.jinja", ToolCallFormat::harmony, 1, false, true},
    {"MiniMax-M2.jinja", ToolCallFormat::minimax_m2, 2, false, false},
    {"MiniMax-M3.jinja", ToolCallFormat::minimax_m3, 2, false, false},
    {"deepseek-ai-DeepSeek-V4-Flash-0731.jinja", ToolCallFormat::deepseek_dsml, 2, false, false},
    {"GLM-4.7-Flash.jinja", ToolCallFormat::glm45, 2, false, false},
    {"inclusionai-ling-3.0-flash.jinja", ToolCallFormat::glm45, 2, false, false},  // GLM-4.5's tags
};

// Where a row's template is: ../shared's set, else the reference's checkout.
fs::path path_of(const Family& f) {
  return fs::exists(kTemplates / f.file) ? kTemplates / f.file : reference_templates() / f.file;
}

// The end-of-turn markers a model stops on (the caller strips the stop token).
const char* const kStops[] = {"<|im_end|>", "<｜end▁of▁sentence｜>", "<|end_of_msg|>", "[e~[",
                              "<|call|>",   "<|role_end|>"};

std::string rtrim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// What the assistant message adds after the generation prompt. Where the
// prompt is not a prefix of the longer render (DeepSeek V3.2 opens
// "<think></think>" but renders a past message with "</think>" alone), the
// text after the longest common prefix, backed up to a marker's or line's end.
// The chat-template call (render_chat_template), with `extra` variables (a
// template's thinking switch) when given.
std::string render(const std::string& source, const ordered_json& messages, bool add_generation_prompt,
                   const ordered_json& extra) {
  const std::time_t now = 1782000000;
  if (extra.empty())
    return ns::chat::jinja::render_chat_template(source, messages, &kTools, add_generation_prompt, "<s>", "</s>", now);
  ordered_json ctx = {{"messages", messages},
                      {"tools", kTools},
                      {"add_generation_prompt", add_generation_prompt},
                      {"bos_token", "<s>"},
                      {"eos_token", "</s>"}};
  ctx.update(extra);
  ns::chat::jinja::RenderOptions o;
  o.has_now = true;
  o.now = now;
  return ns::chat::jinja::Template(source, o).render(ctx, o);
}

std::string generated_text(const std::string& source, const ordered_json& assistant, const std::string& file,
                           bool say_when_not_prefix = true, const ordered_json& extra = ordered_json::object()) {
  const std::string prompt = render(source, kHistory, true, extra);
  ordered_json all = kHistory;
  all.push_back(assistant);
  const std::string full = render(source, all, false, extra);
  size_t k = 0;
  while (k < prompt.size() && k < full.size() && prompt[k] == full[k]) ++k;
  if (k < prompt.size() && say_when_not_prefix) {
    size_t tail = prompt.size() > 30 ? prompt.size() - 30 : 0;
    while (tail < prompt.size() && (static_cast<unsigned char>(prompt[tail]) & 0xC0) == 0x80) ++tail;
    MESSAGE(file << ": the generation prompt is not a prefix of the rendered reply; it ends " << prompt.substr(tail));
  }
  if (k < prompt.size()) {
    while (k > 0 && full[k - 1] != '>' && full[k - 1] != '\n') --k;
  }
  std::string out = rtrim(full.substr(k));
  for (const char* stop : kStops) {
    if (out.ends_with(stop)) {
      out = rtrim(out.substr(0, out.size() - std::string(stop).size()));
      break;
    }
  }
  return out;
}

void check_calls(const ParsedReply& r, const Family& f, size_t n) {
  CHECK(r.tool_calls.size() == n);
  if (r.tool_calls.size() != n) return;
  for (size_t i = 0; i < n; ++i) {
    const ordered_json& want = kCalls[i]["function"];
    CHECK(r.tool_calls[i].name == want["name"].get<std::string>());
    const json got = json::parse(r.tool_calls[i].arguments, nullptr, false);
    CHECK_MESSAGE(got == json(want["arguments"]), "arguments " << r.tool_calls[i].arguments);
    CHECK(r.tool_calls[i].arguments == ordered_json::parse(r.tool_calls[i].arguments).dump());  // compact
    const std::string id = f.kimi_ids ? "functions." + want["name"].get<std::string>() + ":" + std::to_string(i)
                                      : "call_" + std::to_string(i);
    CHECK(r.tool_calls[i].id == id);
  }
}

bool have_templates() {
  if (fs::exists(kTemplates)) return true;
  MESSAGE("skipped: " << kTemplates << " is absent (the shared chat templates live beside the repository)");
  return false;
}

}  // namespace

TEST_CASE("tool calls: each family's template names its format") {
  if (!have_templates()) return;
  for (const Family& f : kFamilies) {
    if (!fs::exists(path_of(f))) {
      MESSAGE("skipped: " << f.file << " is absent");
      continue;
    }
    const std::string file = f.file;
    CAPTURE(file);
    const auto format = tool_call_format(read_file(path_of(f)));
    REQUIRE(format.has_value());
    CHECK(ns::chat::tool_call_format_name(*format) == ns::chat::tool_call_format_name(f.format));
  }
  // Templates that render no tool calls have no format.
  for (const std::string file : {"google-gemma-2-2b-it.jinja", "microsoft-Phi-3.5-mini-instruct.jinja",
                                 "meta-llama-Llama-3.1-8B-Instruct.jinja"}) {
    if (!fs::exists(kTemplates / file)) continue;
    CAPTURE(file);
    CHECK_FALSE(tool_call_format(read_file(kTemplates / file)).has_value());
  }
  CHECK_FALSE(tool_call_format("{% for m in messages %}{{ m.content }}{% endfor %}").has_value());
}

TEST_CASE("tool calls: round trip through each family's real template (reasoning, then calls)") {
  if (!have_templates()) return;
  for (const Family& f : kFamilies) {
    if (!fs::exists(path_of(f))) {
      MESSAGE("skipped: " << f.file << " is absent");
      continue;
    }
    const std::string file = f.file;
    CAPTURE(file);
    ordered_json assistant = {
        {"role", "assistant"}, {"content", ""}, {"reasoning_content", kReasoning}, {"thinking", kReasoning}};
    assistant["tool_calls"] = ordered_json::array();
    for (size_t i = 0; i < f.calls; ++i) assistant["tool_calls"].push_back(kCalls[i]);
    const std::string text = generated_text(read_file(path_of(f)), assistant, f.file);
    CAPTURE(text);
    const ParsedReply r = parse_reply(f.format, text);
    check_calls(r, f, f.calls);
    CHECK(r.content == "");
    // Templates that render the reasoning give it back; the others render none.
    if (text.find(kReasoning) != std::string::npos)
      CHECK(r.reasoning_content == kReasoning);
    else
      CHECK(r.reasoning_content == "");

    // Every truncation of the reply parses without throwing, to the calls it
    // holds complete: never a wrong or partial call.
    for (size_t cut = 0; cut < text.size(); ++cut) {
      const ParsedReply p = parse_reply(f.format, text.substr(0, cut));
      CAPTURE(cut);
      REQUIRE(p.tool_calls.size() <= f.calls);
      for (size_t i = 0; i < p.tool_calls.size(); ++i) {
        CHECK(p.tool_calls[i].name == r.tool_calls[i].name);
        CHECK(p.tool_calls[i].arguments == r.tool_calls[i].arguments);
      }
    }
  }
}

TEST_CASE("tool calls: round trip through each family's real template (content, then calls)") {
  if (!have_templates()) return;
  for (const Family& f : kFamilies) {
    if (!fs::exists(path_of(f))) continue;
    const std::string file = f.file;
    CAPTURE(file);
    ordered_json assistant = {{"role", "assistant"}, {"content", kContent}};
    assistant["tool_calls"] = ordered_json::array();
    for (size_t i = 0; i < f.calls; ++i) assistant["tool_calls"].push_back(kCalls[i]);
    const std::string text = generated_text(read_file(path_of(f)), assistant, f.file);
    CAPTURE(text);
    const ParsedReply r = parse_reply(f.format, text);
    check_calls(r, f, f.calls);
    CHECK((f.content_is_reasoning ? r.reasoning_content : r.content) == kContent);
  }
}

// The same with each template's thinking switch on: the generation prompt
// opens the think block, and the reasoning the message carries comes back.
TEST_CASE("tool calls: round trip with thinking on gives the reasoning back") {
  if (!have_templates()) return;
  const ordered_json on = {{"thinking", true}, {"enable_thinking", true}};
  for (const Family& f : kFamilies) {
    if (!fs::exists(path_of(f))) continue;
    const std::string file = f.file;
    CAPTURE(file);
    ordered_json assistant = {
        {"role", "assistant"}, {"content", ""}, {"reasoning_content", kReasoning}, {"thinking", kReasoning}};
    assistant["tool_calls"] = ordered_json::array();
    for (size_t i = 0; i < f.calls; ++i) assistant["tool_calls"].push_back(kCalls[i]);
    const std::string text = generated_text(read_file(path_of(f)), assistant, file, true, on);
    CAPTURE(text);
    const ParsedReply r = parse_reply(f.format, text);
    check_calls(r, f, f.calls);
    CHECK(r.content == "");
    // DeepSeek V3.1 drops a tool-calling message's reasoning; the Kimi K2 templates have none.
    if (text.find(kReasoning) != std::string::npos)
      CHECK(r.reasoning_content == kReasoning);
    else
      MESSAGE(file << " renders no reasoning for a tool-calling message");
  }
}

TEST_CASE("tool calls: plain text is content, unchanged, in every format") {
  const std::string text = "  The weather in Paris is mild.\n\nAnything else? <not a call>  ";
  for (ToolCallFormat f :
       {ToolCallFormat::kimi_k2, ToolCallFormat::kimi_k3, ToolCallFormat::deepseek_v3, ToolCallFormat::deepseek_dsml,
        ToolCallFormat::hermes_json, ToolCallFormat::qwen35_xml, ToolCallFormat::glm45, ToolCallFormat::harmony,
        ToolCallFormat::minimax_m2, ToolCallFormat::minimax_m3}) {
    CAPTURE(ns::chat::tool_call_format_name(f));
    const ParsedReply r = parse_reply(f, text);
    CHECK(r.content == text);
    CHECK(r.reasoning_content.empty());
    CHECK(r.tool_calls.empty());
    CHECK(parse_reply(f, "").content.empty());
  }
}

TEST_CASE("tool calls: text before a call stays content") {
  const ParsedReply r = parse_reply(ToolCallFormat::hermes_json,
                                    "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                                    "{\"location\": \"Paris\"}}\n</tool_call>");
  CHECK(r.content == "Let me check.");
  REQUIRE(r.tool_calls.size() == 1);
  CHECK(r.tool_calls[0].id == "call_0");
  CHECK(r.tool_calls[0].name == "get_weather");
  CHECK(r.tool_calls[0].arguments == R"({"location":"Paris"})");

  const ParsedReply k = parse_reply(ToolCallFormat::kimi_k2,
                                    "Sure.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
                                    "<|tool_call_argument_begin|>{\"location\": \"Paris\"}<|tool_call_end|>"
                                    "<|tool_calls_section_end|>");
  CHECK(k.content == "Sure.");
  REQUIRE(k.tool_calls.size() == 1);
  CHECK(k.tool_calls[0].id == "functions.get_weather:0");
  CHECK(k.tool_calls[0].name == "get_weather");
}

TEST_CASE("tool calls: malformed or incomplete markup stays content and never throws") {
  struct Case {
    ToolCallFormat f;
    const char* text;
  };
  const Case cases[] = {
      {ToolCallFormat::hermes_json, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": "},
      {ToolCallFormat::hermes_json, "<tool_call>\n{\"arguments\": {}}\n</tool_call>"},  // no name
      {ToolCallFormat::hermes_json, "<tool_call>\nnot json\n</tool_call>"},
      {ToolCallFormat::hermes_json, "<tool_call>\n{\"name\": \"f\", \"arguments\": [1, 2]}\n</tool_call>"},
      {ToolCallFormat::kimi_k2,
       "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{bad json}"
       "<|tool_call_end|><|tool_calls_section_end|>"},
      {ToolCallFormat::kimi_k2, "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0"},
      {ToolCallFormat::deepseek_v3,
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
      {ToolCallFormat::deepseek_dsml,
       "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜oops>1</｜DSML｜oops>\n</｜DSML｜invoke>\n"
       "</｜DSML｜function_calls>"},
      {ToolCallFormat::deepseek_dsml, "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f>\n</｜DSML｜tool_calls>"},
      {ToolCallFormat::qwen35_xml, "<tool_call>\n<function=f>\n<parameter=a>\n1\n</function>\n</tool_call>"},
      {ToolCallFormat::qwen35_xml, "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n"},
      {ToolCallFormat::glm45, "<tool_call>f\n<arg_key>a</arg_key>\n</tool_call>"},
      {ToolCallFormat::glm45, "<tool_call>two words\n</tool_call>"},
      {ToolCallFormat::minimax_m2, "<minimax:tool_call>\n<invoke name=\"f\">\n<parameter name=\"a\">1</invoke>\n"},
      {ToolCallFormat::minimax_m3,
       "]<]minimax[>[<tool_call>\n]<]minimax[>[<invoke name=\"f\">]<]minimax[>[<a>1]<]minimax[>[</invoke>\n"
       "]<]minimax[>[</tool_call>"},  // <a> never closed
      {ToolCallFormat::kimi_k3,
       "<|open|>tools<|sep|><|open|>call index=\"1\"<|sep|><|close|>call<|sep|><|close|>tools<|sep|>"},  // no tool
      {ToolCallFormat::harmony, "<|channel|>commentary to=functions.f json<|message|>{\"a\": "},
      {ToolCallFormat::harmony, "<|start|>assistant to=browser.search<|channel|>commentary<|message|>{}<|call|>"},
  };
  for (const Case& c : cases) {
    const std::string text = c.text;
    CAPTURE(text);
    ParsedReply r;
    CHECK_NOTHROW(r = parse_reply(c.f, c.text));
    CHECK(r.tool_calls.empty());
    CHECK(r.content == std::string(c.text).substr(0, r.content.size()));
    CHECK(!r.content.empty());
  }
  // A broken call does not take a complete one with it in block-per-call formats.
  const ParsedReply two = parse_reply(ToolCallFormat::hermes_json,
                                      "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n"
                                      "<tool_call>\n{\"name\": \"g\", \"arguments\": \n</tool_call>");
  REQUIRE(two.tool_calls.size() == 1);
  CHECK(two.tool_calls[0].name == "f");
  CHECK(two.content == "<tool_call>\n{\"name\": \"g\", \"arguments\": \n</tool_call>");
  // Nor does a begin marker left open before a complete block.
  const ParsedReply open = parse_reply(ToolCallFormat::hermes_json,
                                       "I will use <tool_call> tags.\n<tool_call>\n{\"name\": \"f\", \"arguments\": "
                                       "{\"a\": 1}}\n</tool_call>");
  REQUIRE(open.tool_calls.size() == 1);
  CHECK(open.tool_calls[0].arguments == R"({"a":1})");
  CHECK(open.content == "I will use <tool_call> tags.");
  // Invalid UTF-8 never throws either.
  CHECK_NOTHROW(parse_reply(ToolCallFormat::glm45,
                            "<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>\xff\xfe</arg_value>"
                            "\n</tool_call>"));
}

TEST_CASE("tool calls: reasoning goes to reasoning_content") {
  ParsedReply r = parse_reply(ToolCallFormat::hermes_json, "<think>\nLet me think.\n</think>\n\nHello!");
  CHECK(r.reasoning_content == "Let me think.");
  CHECK(r.content == "Hello!");
  // The generation prompt opened the block (Qwen3.5, DeepSeek thinking, MiniMax-M2).
  r = parse_reply(ToolCallFormat::qwen35_xml, "Let me think.\n</think>\n\nHello!");
  CHECK(r.reasoning_content == "Let me think.");
  CHECK(r.content == "Hello!");
  // Cut off while thinking.
  r = parse_reply(ToolCallFormat::deepseek_dsml, "<think>Still thinking");
  CHECK(r.reasoning_content == "Still thinking");
  CHECK(r.content == "");
  // Kimi K3's think and response blocks.
  r = parse_reply(ToolCallFormat::kimi_k3,
                  "Let me think.<|close|>think<|sep|><|open|>response<|sep|>Hello!<|close|>response<|sep|>"
                  "<|close|>message<|sep|>");
  CHECK(r.reasoning_content == "Let me think.");
  CHECK(r.content == "Hello!");
  r = parse_reply(ToolCallFormat::kimi_k3, "Hello!<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>");
  CHECK(r.reasoning_content == "");
  CHECK(r.content == "Hello!");
  // Harmony: the analysis channel, then the final answer.
  r = parse_reply(ToolCallFormat::harmony,
                  "<|channel|>analysis<|message|>Let me think.<|end|><|start|>assistant<|channel|>final<|message|>"
                  "Hello!<|return|>");
  CHECK(r.reasoning_content == "Let me think.");
  CHECK(r.content == "Hello!");
  CHECK(r.tool_calls.empty());
}

TEST_CASE("tool calls: harmony's recipient after the channel, <|constrain|>, and <|call|> kept") {
  const ParsedReply r = parse_reply(ToolCallFormat::harmony,
                                    "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>"
                                    "commentary to=functions.get_weather <|constrain|>json<|message|>"
                                    "{\"location\":\"Paris\"}<|call|>");
  CHECK(r.reasoning_content == "Need weather.");
  CHECK(r.content == "");
  REQUIRE(r.tool_calls.size() == 1);
  CHECK(r.tool_calls[0].name == "get_weather");
  CHECK(r.tool_calls[0].arguments == R"({"location":"Paris"})");
  CHECK(r.tool_calls[0].id == "call_0");
}

TEST_CASE("tool calls: DeepSeek V3 / R1's fenced form") {
  const ParsedReply r = parse_reply(ToolCallFormat::deepseek_v3,
                                    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
                                    "```json\n{\"location\": \"Paris\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>");
  REQUIRE(r.tool_calls.size() == 1);
  CHECK(r.tool_calls[0].name == "get_weather");
  CHECK(r.tool_calls[0].arguments == R"({"location":"Paris"})");
}

TEST_CASE("tool calls: UTF-8 in arguments is kept as UTF-8, escapes decoded") {
  ParsedReply r = parse_reply(ToolCallFormat::hermes_json,
                              "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                              "{\"city\": \"東京\", \"note\": \"caf\\u00e9 \\u2615\"}}\n</tool_call>");
  REQUIRE(r.tool_calls.size() == 1);
  CHECK(r.tool_calls[0].arguments == R"({"city":"東京","note":"café ☕"})");
  r = parse_reply(ToolCallFormat::glm45,
                  "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Zürich</arg_value>\n"
                  "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>");
  REQUIRE(r.tool_calls.size() == 1);
  CHECK(r.tool_calls[0].arguments == R"({"city":"Zürich","days":3})");
  // A string the markup marks as such is not JSON-parsed.
  r = parse_reply(
      ToolCallFormat::deepseek_dsml,
      "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"zip\" string=\"true\">"
      "75001</｜DSML｜parameter>\n<｜DSML｜parameter name=\"n\" string=\"false\">75001</｜DSML｜parameter>\n"
      "</｜DSML｜invoke>\n</｜DSML｜tool_calls>");
  REQUIRE(r.tool_calls.size() == 1);
  CHECK(r.tool_calls[0].arguments == R"({"zip":"75001","n":75001})");
  // Kimi K3 escapes attribute values.
  r = parse_reply(ToolCallFormat::kimi_k3,
                  "<|open|>tools<|sep|><|open|>call tool=\"f\" index=\"1\"<|sep|><|open|>argument key=\"a&quot;b\" "
                  "type=\"string\"<|sep|>x &amp; y<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>");
  REQUIRE(r.tool_calls.size() == 1);
  CHECK(r.tool_calls[0].arguments == R"({"a\"b":"x &amp; y"})");
}

// Beyond the families above: every template the detector gives a format must
// round-trip too, else the detector took it for a markup it does not write.
// Older templates want arguments as a JSON string, or render calls only when
// content is empty; each is tried until one renders the calls.
TEST_CASE("tool calls: every shared template with a format round-trips") {
  if (!have_templates()) return;
  for (const auto& entry : fs::directory_iterator(kTemplates)) {
    const std::string file = entry.path().filename().string();
    const std::string source = read_file(entry.path());
    const auto format = tool_call_format(source);
    if (!format) continue;
    CAPTURE(file);
    const bool harmony = *format == ToolCallFormat::harmony;
    const Family f{"", *format, harmony ? size_t(1) : size_t(2), *format == ToolCallFormat::kimi_k2, harmony};
    std::string text;
    for (int attempt = 0; attempt < 4 && text.find("get_weather") == std::string::npos; ++attempt) {
      const bool string_arguments = attempt & 1, with_content = attempt < 2;
      ordered_json assistant = {{"role", "assistant"}, {"content", with_content ? kContent : ""}};
      assistant["tool_calls"] = ordered_json::array();
      for (size_t i = 0; i < f.calls; ++i) {
        ordered_json call = kCalls[i];
        if (string_arguments) call["function"]["arguments"] = call["function"]["arguments"].dump();
        assistant["tool_calls"].push_back(call);
      }
      try {
        text = generated_text(source, assistant, file, false);
      } catch (const std::exception&) {
        text.clear();
      }
    }
    if (text.find("get_weather") == std::string::npos) {
      MESSAGE(file << ": renders no tool calls for this conversation");
      continue;
    }
    CAPTURE(text);
    check_calls(parse_reply(f.format, text), f, f.calls);
  }
}
