// nightshift's Jinja engine for chat templates: renders a model's own
// `tokenizer.chat_template` the way Hugging Face transformers'
// apply_chat_template does (jinja2 3.1 SandboxedEnvironment, trim_blocks and
// lstrip_blocks, loop controls, the {% generation %} block, tojson as
// json.dumps(ensure_ascii=False), raise_exception and strftime_now).
//
// Covered: if/elif/else, for (loop.*, else, inline if, tuple targets), set
// (block set, namespace attributes), macro/call/caller, filter blocks, raw,
// break/continue, whitespace control; Python expression semantics (str, list,
// dict methods, slicing by code point, Python's str()/repr() of values);
// jinja2's lenient Undefined (prints as "", its attributes raise). The
// conformance test (tests/unit/chat/jinja_conformance_test.cpp) checks it
// against jinja2's output for the shared templates.
//
// Contract:
// - A Template is parsed once and is immutable afterwards: one Template may
//   render on many threads at once (each render owns its scopes).
// - Template's constructor throws ns::Error(invalid_input) "TemplateSyntaxError:
//   ..." on bad syntax. render throws ns::Error(invalid_input) with the
//   template's own message when it calls raise_exception ("TemplateError:
//   <message>"), or jinja2's error text when an expression fails (undefined
//   attribute of an undefined value, a type error, a missing filter), or when
//   a limit is hit (macro nesting deeper than max_call_depth, output past
//   max_output_bytes).
// - Input values come as nlohmann::ordered_json, so a dict keeps the input's
//   key order (tojson of a tool definition prints its keys as given).
#pragma once

#include <cstddef>
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace ns::chat::jinja {

struct RenderOptions {
  bool trim_blocks = true;    // applied at parse time: Template(source, options)
  bool lstrip_blocks = true;  // applied at parse time: Template(source, options)
  bool has_now = false;       // strftime_now uses `now` (UTC) when set, else the clock
  std::time_t now = 0;
  size_t max_output_bytes = 64u << 20;
  int max_call_depth = 200;  // nested macro calls
};

class Template {
 public:
  explicit Template(const std::string& source, const RenderOptions& parse_options = {});
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  // context: a JSON object whose members become the template's variables.
  std::string render(const nlohmann::ordered_json& context, const RenderOptions& options = {}) const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

// The chat-template call as transformers makes it: variables messages,
// add_generation_prompt, tools (only when `tools` is non-null), bos_token,
// eos_token; strftime_now at `now` (UTC).
std::string render_chat_template(const std::string& source, const nlohmann::ordered_json& messages,
                                 const nlohmann::ordered_json* tools, bool add_generation_prompt,
                                 const std::string& bos, const std::string& eos, std::time_t now);

}  // namespace ns::chat::jinja
