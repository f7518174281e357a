// Tool calls read back out of a model's generated text: when a chat request
// offers `tools`, the model answers with text, with calls written in its
// family's own markup (the markup its chat template renders an assistant
// message's `tool_calls` with), or both. This module turns that text into the
// OpenAI shape: content, reasoning_content and tool_calls.
//
// The format is decided from the chat template's text, by the markers it
// renders for tool calls (tool_call_format); parse_reply then splits a reply.
// Each format is learnt from the family's real template, and the unit test
// renders an assistant message with tool calls through each of those templates
// and parses the text back (tests/unit/chat/tool_calls_test.cpp).
//
// What the parser does with a reply:
// - Reasoning (<think>...</think>, Kimi K3's think block, harmony's analysis
//   channel) goes to reasoning_content. The generation prompt of a thinking
//   model often opens the think block itself, so a closing marker with no
//   opening one ends reasoning that began at the start of the reply; an
//   opening marker at the start with no closing one (a reply cut off while
//   thinking) makes the rest reasoning.
// - A complete call becomes a ToolCall: its arguments normalized to a compact
//   JSON object text (keys in the model's order; a value in an XML-ish format
//   is JSON-parsed when it parses, else kept as a string, unless the markup
//   says it is a string). Ids: the model's own where the format carries one
//   (Kimi K2's "functions.NAME:IDX"), else "call_<i>", i counting the reply's
//   calls from 0.
// - Everything else is content: text around the calls, and any call markup
//   that is incomplete or malformed (a missing end marker, arguments that are
//   not a JSON object) stays in content verbatim. When reasoning or calls were
//   taken out, content is trimmed of surrounding whitespace; a reply with no
//   markup at all is returned unchanged as content.
// - End-of-turn markers are the tokenizer's business: the caller passes the
//   text without the stop token. A trailing one the format defines as part of
//   the turn (Kimi K3's <|close|>message<|sep|><|end_of_msg|>, harmony's
//   <|call|>/<|return|>/<|end|>) is accepted and dropped.
//
// Contract:
// - Pure functions of their arguments, thread-safe.
// - Nothing throws on any input (bad markup, invalid UTF-8, truncated text):
//   parse_reply never throws, and tool_call_format only decides by markers.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ns::chat {

enum class ToolCallFormat {
  // Kimi K2: <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{json}
  // <|tool_call_end|>...<|tool_calls_section_end|>
  kimi_k2,
  // Kimi K3: <|open|>tools<|sep|><|open|>call tool="NAME" index="1"<|sep|><|open|>argument key="K" type="T"<|sep|>
  // V<|close|>argument<|sep|>...<|close|>call<|sep|><|close|>tools<|sep|>, after its think and response blocks
  kimi_k3,
  // DeepSeek V3.1: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{json}<｜tool▁call▁end｜>...
  // <｜tool▁calls▁end｜>; also V3/R1's function<｜tool▁sep｜>NAME\n```json\n{json}\n```
  deepseek_v3,
  // DeepSeek V3.2 (<｜DSML｜function_calls>) and V4 (<｜DSML｜tool_calls>) around <｜DSML｜invoke name="NAME">
  // <｜DSML｜parameter name="K" string="true|false">V</｜DSML｜parameter>...</｜DSML｜invoke>
  deepseek_dsml,
  // Qwen3, Qwen2.5, Hermes: <tool_call>\n{"name": NAME, "arguments": {...}}\n</tool_call>
  hermes_json,
  // Qwen3.5 (Qwen3-Coder's markup): <tool_call>\n<function=NAME>\n<parameter=K>\nV\n</parameter>\n</function>
  // \n</tool_call>
  qwen35_xml,
  // GLM-4.5, 4.6: <tool_call>NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>\n</tool_call>
  glm45,
  // gpt-oss: <|channel|>analysis<|message|>...<|end|><|start|>assistant to=functions.NAME<|channel|>commentary
  // json<|message|>{json}<|call|>; the answer in the final channel
  harmony,
  // MiniMax-M2: <minimax:tool_call>\n<invoke name="NAME">\n<parameter name="K">V</parameter>\n</invoke>\n
  // </minimax:tool_call>
  minimax_m2,
  // MiniMax-M3: NS<tool_call>\nNS<invoke name="NAME">NS<K>V NS</K>NS</invoke>\nNS</tool_call> with
  // NS = ]<]minimax[>[, V a scalar or nested NS<item>/NS<key> elements; reasoning in <mm:think>
  minimax_m3,
};

// The format's short name ("kimi-k2", "deepseek-dsml", "hermes-json", ...), for logs and messages.
std::string_view tool_call_format_name(ToolCallFormat f);

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // a compact JSON object text: OpenAI sends arguments as a string
};

struct ParsedReply {
  std::string content;
  std::string reasoning_content;
  std::vector<ToolCall> tool_calls;
};

// Which tool-call markup a model writes, decided from its chat template's text
// (the markers it renders for tool_calls), or std::nullopt when the template
// renders none.
std::optional<ToolCallFormat> tool_call_format(const std::string& template_text);

// The reply split into content, reasoning and tool calls; text that is not a
// complete call stays content.
ParsedReply parse_reply(ToolCallFormat f, const std::string& generated_text);

}  // namespace ns::chat
