// Detection from tokenizer.chat_template text, as llama.cpp's
// llm_chat_detect_template decides. Each template string below is a short
// excerpt of the real model's template: just the lines that carry the markers
// llama.cpp looks for, not the whole template.
#include <doctest/doctest.h>

#include <string>

#include "engine/chat/chat_template.h"
#include "common/error.h"

using ns::chat::ChatTemplate;
using ns::chat::detect_family_name;
using ns::chat::detect_template;

namespace {

struct Excerpt {
  const char* model;
  const char* text;
  ChatTemplate expected;
};

const Excerpt kExcerpts[] = {
    {"Qwen2.5-Instruct",
     "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + "
     "'\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}",
     ChatTemplate::chatml},
    {"Qwen3 (thinking)",
     "{{- '<|im_start|>' + message.role + '\\n' + content }}{%- if enable_thinking is defined and enable_thinking is "
     "false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}",
     ChatTemplate::chatml},
    {"Kimi-K2-Instruct",
     "{%- if message['role'] == 'user' -%}{{ '<|im_user|>user<|im_middle|>' }}{%- elif message['role'] == "
     "'assistant' -%}{{ '<|im_assistant|>assistant<|im_middle|>' }}{%- endif -%}{{- message['content'] + "
     "'<|im_end|>' -}}",
     ChatTemplate::kimi_k2},
    {"Kimi-K3",
     "{%- macro open_tag(tag, attrs=[]) -%}{{- '<|open|>' + tag -}}{{- '<|sep|>' -}}{%- endmacro -%}{%- macro "
     "close_tag(tag) -%}{{- '<|close|>' + tag + '<|sep|>' -}}{%- endmacro -%}{{- close_tag('message') -}}{{- "
     "'<|end_of_msg|>' -}}",
     ChatTemplate::kimi_k3},
    {"GLM-4.5 / GLM-4.6",
     "[gMASK]<sop>\n{%- if m.role == 'user' -%}<|user|>\n{{ visible_text(m.content) }}{%- else -%}{{ "
     "'\\n<think></think>' }}{%- endif -%}{%- if add_generation_prompt -%}<|assistant|>{%- endif -%}",
     ChatTemplate::glm45},
    {"DeepSeek-V3",
     "{{'<｜User｜>' + message['content']}}{{'<｜Assistant｜>' + message['content'] + '<｜end▁of▁sentence｜>'}}",
     ChatTemplate::deepseek3},
    {"DeepSeek-V2-Chat",
     "{% if message['role'] == 'user' %}{{ 'User: ' + message['content'] + '\\n\\n' }}{% elif message['role'] == "
     "'assistant' %}{{ 'Assistant: ' + message['content'] + eos_token }}",
     ChatTemplate::deepseek2},
    {"Llama-3.1-Instruct",
     "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + "
     "'<|eot_id|>' }}",
     ChatTemplate::llama3},
    {"Mixtral-8x7B-Instruct-v0.1",
     "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == "
     "'assistant' %}{{ message['content'] + eos_token}}",
     ChatTemplate::llama2},
    {"Llama-2-chat",
     "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{{ bos_token + "
     "'[INST] ' + content.strip() + ' [/INST]' }}",
     ChatTemplate::llama2_sys_strip},
    {"FusionNet_34Bx2_MoE",
     "{{- '[INST] <<SYS>>\\n' + messages[idx]['content'] + '\\n<</SYS>>\\n\\n' -}}{{- bos_token + '[INST] ' + "
     "messages[idx]['content'] + ' [/INST]' -}}",
     ChatTemplate::llama2_sys_bos},
    {"a Llama 2 variant with <<SYS>> only", "{{ '[INST] <<SYS>>\\n' + message['content'] + '\\n<</SYS>>\\n\\n' }}",
     ChatTemplate::llama2_sys},
    {"Mistral-7B-Instruct (official v1)",
     "{%- if loop.first and system_message is defined %}{{- ' [INST] ' + system_message + '\\n\\n' + "
     "message['content'] + ' [/INST]' }}",
     ChatTemplate::mistral_v1},
    {"Mistral-Large-Instruct-2407 (v3)",
     "{{- \"[AVAILABLE_TOOLS] [\" }}{%- if loop.last and system_message is defined %}{{- \"[INST] \" + "
     "system_message + \"\\n\\n\" + message[\"content\"] + \"[/INST]\" }}",
     ChatTemplate::mistral_v3},
    {"Mistral-Nemo-Instruct-2407 (v3-tekken)",
     "{{- \"[AVAILABLE_TOOLS][\" }}{%- else %}{{- \"[INST]\" + message[\"content\"] + \"[/INST]\" }}",
     ChatTemplate::mistral_v3_tekken},
    {"Mistral-Large-Instruct-2411 (v7)",
     "{% elif message['role'] == 'system' %}{{ '[SYSTEM_PROMPT] ' + message['content'] + '[/SYSTEM_PROMPT]' }}{% "
     "elif message['role'] == 'user' %}{{ '[INST] ' + message['content'] + '[/INST]' }}",
     ChatTemplate::mistral_v7},
};

}  // namespace

TEST_CASE("each family is detected from the markers of its real template") {
  for (const Excerpt& e : kExcerpts) {
    CAPTURE(e.model);
    const auto t = detect_template(e.text);
    REQUIRE(t.has_value());
    CHECK(ns::chat::template_name(*t) == std::string(ns::chat::template_name(e.expected)));
    CHECK(ns::chat::require_template(e.text) == e.expected);
  }
}

TEST_CASE("every supported family is also accepted by its llama.cpp name") {
  for (ChatTemplate t : ns::chat::supported_templates()) {
    const std::string name = ns::chat::template_name(t);
    CAPTURE(name);
    CHECK(detect_template(name) == t);
    CHECK(ns::chat::template_from_name(name) == t);
    CHECK(ns::chat::supported_template_names().find(name) != std::string::npos);
  }
  CHECK(ns::chat::supported_templates().size() == 18);
  CHECK_FALSE(ns::chat::template_from_name("qwen").has_value());    // not a llama.cpp name
  CHECK_FALSE(ns::chat::template_from_name("ChatML").has_value());  // names are exact
}

TEST_CASE("text starting with \"mistral\" is an [INST] template, as in llama.cpp") {
  CHECK(detect_family_name("mistral") == "llama2");
  CHECK(detect_template("mistral") == ChatTemplate::llama2);
  CHECK(detect_family_name("mistral-v7-tekken") == "mistral-v7-tekken");  // the exact name wins
}

TEST_CASE("the order of llama.cpp's checks decides between families sharing a marker") {
  // Phi-4 uses <|im_start|> but is not ChatML.
  CHECK(detect_family_name("{{'<|im_start|>system<|im_sep|>' + message['content'] + '<|im_end|>'}}") == "phi4");
  CHECK_FALSE(detect_template("{{'<|im_start|>system<|im_sep|>' + message['content'] + '<|im_end|>'}}").has_value());
  // SmolVLM uses <|im_start|> as its BOS only.
  CHECK(detect_family_name("<|im_start|>{{ 'User: ' }}<end_of_utterance>") == "smolvlm");
  // Kimi K2 has <|im_end|> but no <|im_start|>: not ChatML.
  CHECK(detect_family_name("<|im_assistant|>assistant<|im_middle|>...<|im_end|>") == "kimi-k2");
  // DeepSeek V3 needs all three markers.
  CHECK(detect_family_name("{{'<｜User｜>' + content}}{{'<｜Assistant｜>'}}") == "");
  // [INST] beats the Llama 3 markers, because llama.cpp tests it first.
  CHECK(detect_family_name("[INST] <|start_header_id|><|end_header_id|>") == "llama2");
  // A v3 marker with " [INST]" is v1.
  CHECK(detect_family_name("[AVAILABLE_TOOLS] ... ' [INST] '") == "mistral-v1");
  // Kimi K3 (not in llama.cpp's chain) needs all three markers, and comes after every family of the chain.
  CHECK(detect_family_name("<|open|>message<|sep|>...<|close|>message<|sep|>") == "");
  CHECK(detect_family_name("<|open|><|close|><|end_of_msg|><|im_start|>") == "chatml");
  // GLM-4.5/4.6 are llama.cpp's chatglm4 with an empty think section before each reply; GLM-4.7's template
  // (think sections written differently) stays chatglm4, which nightshift does not render.
  CHECK(detect_family_name("[gMASK]<sop>{{ '\\n<think></think>' }}") == "glm-4.5");
  CHECK(detect_family_name("[gMASK]<sop><|user|>{{ visible_text(m.content) }}{{ '</think>' }}") == "chatglm4");
  CHECK_FALSE(detect_template("[gMASK]<sop><|user|>{{ '</think>' }}").has_value());
}

TEST_CASE("families llama.cpp knows and nightshift does not render are named, not guessed") {
  struct Case {
    const char* text;
    const char* family;
  };
  const Case cases[] = {
      {"{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}", "gemma"},
      {"{{'<|user|>' + '\\n' + message['content'] + '<|end|>' + '\\n' + '<|assistant|>' + '\\n'}}", "phi3"},
      {"{{ '<|header_start|>' + message['role'] + '<|header_end|>\\n\\n' }}", "llama4"},
      {"<|START_OF_TURN_TOKEN|><|USER_TOKEN|>", "command-r"},
      {"{{'### Instruction:\\n' + message['content'] + '\\n'}}<|EOT|>", "deepseek"},
      {"gemma", "gemma"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    CHECK(detect_family_name(c.text) == c.family);
    CHECK_FALSE(detect_template(c.text).has_value());
    try {
      ns::chat::require_template(c.text);
      FAIL("expected an error");
    } catch (const ns::Error& e) {
      CHECK(e.kind() == ns::ErrorKind::invalid_input);
      const std::string what = e.what();
      CHECK(what.find(std::string("\"") + c.family + "\" family") != std::string::npos);
      CHECK(what.find("does not render") != std::string::npos);
      CHECK(what.find(ns::chat::supported_template_names()) != std::string::npos);
    }
  }
}

TEST_CASE("an unknown template's error quotes its first 80 bytes and lists the families") {
  const std::string text =
      "{% for m in messages %}<<turn {{ m.role }}>>\n{{ m.content }}<<end>>{% endfor %}{% if add_generation_prompt "
      "%}<<turn assistant>>{% endif %}";
  CHECK(detect_family_name(text) == "");
  CHECK_FALSE(detect_template(text).has_value());
  try {
    ns::chat::require_template(text);
    FAIL("expected an error");
  } catch (const ns::Error& e) {
    CHECK(e.kind() == ns::ErrorKind::invalid_input);
    const std::string what = e.what();
    CHECK(what.find("unknown chat template") != std::string::npos);
    std::string first80 = text.substr(0, 80);
    first80.replace(first80.find('\n'), 1, "\\n");  // shown escaped, on one line
    CHECK(what.find("\"" + first80 + "...\"") != std::string::npos);
    CHECK(what.find(text.substr(0, 81)) == std::string::npos);
    CHECK(what.find('\n') == std::string::npos);
    CHECK(what.find("chatml, llama2, llama2-sys") != std::string::npos);
    CHECK(what.find("kimi-k2") != std::string::npos);
  }
}

TEST_CASE("the quoted excerpt never cuts a UTF-8 character") {
  // 79 ASCII bytes, then a 3-byte character that straddles the 80-byte limit.
  const std::string text = std::string(79, 'x') + "｜" + "tail";
  try {
    ns::chat::require_template(text);
    FAIL("expected an error");
  } catch (const ns::Error& e) {
    const std::string what = e.what();
    CHECK(what.find("\"" + std::string(79, 'x') + "...\"") != std::string::npos);
  }
  CHECK_THROWS_WITH_AS(ns::chat::require_template(""), doctest::Contains("empty"), ns::Error);
  // A short template is quoted whole, without "...".
  CHECK_THROWS_WITH_AS(ns::chat::require_template("{{ x }}"), doctest::Contains("\"{{ x }}\" (first 80 bytes)"),
                       ns::Error);
}
