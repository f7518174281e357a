// Rendering checked against llama.cpp's expectations: the conversation and the
// expected strings come from llama.cpp's tests/test-chat-template.cpp (the
// llama_chat_apply_template cases and the common_chat_format_single checks).
// Families that file has no case for (llama2-sys, mistral-v7-tekken,
// deepseek3, kimi-k2) are written out from llama.cpp's renderer by hand and
// say so; the kimi-k2 one also equals what Kimi K2's own Jinja template gives.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "engine/chat/chat_template.h"
#include "common/error.h"
#include "tests/unit/error_message.h"

using ns::chat::ChatMessage;
using ns::chat::ChatTemplate;
using ns::chat::render_chat;

namespace {

// llama.cpp's test conversation; note the spaces around the second reply,
// which show which families trim.
const std::vector<ChatMessage> kConversation = {
    {"system", "You are a helpful assistant"},
    {"user", "Hello"},
    {"assistant", "Hi there"},
    {"user", "Who are you"},
    {"assistant", "   I am an assistant   "},
    {"user", "Another question"},
};

std::string render(ChatTemplate t, bool add_assistant = true) { return render_chat(t, kConversation, add_assistant); }

}  // namespace

TEST_CASE("chatml (Qwen) renders as llama.cpp's OpenHermes case") {
  CHECK(render(ChatTemplate::chatml) ==
        "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
        "<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n"
        "<|im_start|>assistant\n   I am an assistant   <|im_end|>\n<|im_start|>user\nAnother question<|im_end|>\n"
        "<|im_start|>assistant\n");
}

TEST_CASE("llama2 (Mistral/Mixtral Instruct v0.1-v0.2) folds the system text into the first turn") {
  CHECK(render(ChatTemplate::llama2) ==
        "[INST] You are a helpful assistant\nHello [/INST]Hi there</s>[INST] Who are you [/INST]   I am an "
        "assistant   </s>[INST] Another question [/INST]");
}

TEST_CASE("llama2-sys-bos (FusionNet case) puts <s> before later turns") {
  CHECK(render(ChatTemplate::llama2_sys_bos) ==
        "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s><s>[INST] Who are you "
        "[/INST]   I am an assistant   </s><s>[INST] Another question [/INST]");
}

TEST_CASE("llama2-sys-strip (vigogne case) trims every message") {
  CHECK(render(ChatTemplate::llama2_sys_strip) ==
        "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>[INST] Who are you "
        "[/INST]I am an assistant</s>[INST] Another question [/INST]");
}

TEST_CASE("llama2-sys (written from llama.cpp's renderer)") {
  CHECK(render(ChatTemplate::llama2_sys) ==
        "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>[INST] Who are you "
        "[/INST]   I am an assistant   </s>[INST] Another question [/INST]");
}

TEST_CASE("mistral-v1: a space before [INST] and [/INST], replies kept as given") {
  CHECK(render(ChatTemplate::mistral_v1) ==
        " [INST] You are a helpful assistant\n\nHello [/INST] Hi there</s> [INST] Who are you [/INST]    I am an "
        "assistant   </s> [INST] Another question [/INST]");
}

TEST_CASE("mistral-v3 (Mistral Large 2407) trims the replies") {
  CHECK(render(ChatTemplate::mistral_v3) ==
        "[INST] You are a helpful assistant\n\nHello[/INST] Hi there</s>[INST] Who are you[/INST] I am an "
        "assistant</s>[INST] Another question[/INST]");
}

TEST_CASE("mistral-v3-tekken (Mistral Nemo) has no spaces") {
  CHECK(render(ChatTemplate::mistral_v3_tekken) ==
        "[INST]You are a helpful assistant\n\nHello[/INST]Hi there</s>[INST]Who are you[/INST]   I am an "
        "assistant   </s>[INST]Another question[/INST]");
}

TEST_CASE("mistral-v7 (Mistral Large 2411) has a [SYSTEM_PROMPT] block") {
  CHECK(render(ChatTemplate::mistral_v7) ==
        "[SYSTEM_PROMPT] You are a helpful assistant[/SYSTEM_PROMPT][INST] Hello[/INST] Hi there</s>[INST] Who are "
        "you[/INST]    I am an assistant   </s>[INST] Another question[/INST]");
}

TEST_CASE("mistral-v7-tekken is v7 without the spaces (written from llama.cpp's renderer)") {
  CHECK(render(ChatTemplate::mistral_v7_tekken) ==
        "[SYSTEM_PROMPT]You are a helpful assistant[/SYSTEM_PROMPT][INST]Hello[/INST]Hi there</s>[INST]Who are "
        "you[/INST]   I am an assistant   </s>[INST]Another question[/INST]");
}

TEST_CASE("llama3 trims every message") {
  CHECK(render(ChatTemplate::llama3) ==
        "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nI am an assistant<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nAnother question<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST_CASE("deepseek2 (DeepSeek V2)") {
  CHECK(render(ChatTemplate::deepseek2) ==
        "You are a helpful assistant\n\nUser: Hello\n\nAssistant: Hi there<｜end▁of▁sentence｜>User: Who are "
        "you\n\nAssistant:    I am an assistant   <｜end▁of▁sentence｜>User: Another question\n\nAssistant:");
}

TEST_CASE("deepseek3 (DeepSeek V3; written from llama.cpp's renderer)") {
  CHECK(render(ChatTemplate::deepseek3) ==
        "You are a helpful assistant\n\n<｜User｜>Hello<｜Assistant｜>Hi there<｜end▁of▁sentence｜><｜User｜>Who "
        "are you<｜Assistant｜>   I am an assistant   <｜end▁of▁sentence｜><｜User｜>Another "
        "question<｜Assistant｜>");
}

TEST_CASE("kimi-k2 (Kimi K2; written from llama.cpp's renderer, equal to the model's own template here)") {
  CHECK(render(ChatTemplate::kimi_k2) ==
        "<|im_system|>system<|im_middle|>You are a helpful assistant<|im_end|>"
        "<|im_user|>user<|im_middle|>Hello<|im_end|>"
        "<|im_assistant|>assistant<|im_middle|>Hi there<|im_end|>"
        "<|im_user|>user<|im_middle|>Who are you<|im_end|>"
        "<|im_assistant|>assistant<|im_middle|>   I am an assistant   <|im_end|>"
        "<|im_user|>user<|im_middle|>Another question<|im_end|>"
        "<|im_assistant|>assistant<|im_middle|>");
}

TEST_CASE("a system message alone, as llama.cpp's common_chat_format_single checks it") {
  const std::vector<ChatMessage> system = {{"system", "You are a helpful assistant"}};
  CHECK(render_chat("chatml", system, false) == "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n");
  CHECK(render_chat("mistral-v1", system, false) == " [INST] You are a helpful assistant\n\n");
  CHECK(render_chat("mistral-v3", system, false) == "[INST] You are a helpful assistant\n\n");
  CHECK(render_chat("mistral-v3-tekken", system, false) == "[INST]You are a helpful assistant\n\n");
  CHECK(render_chat("mistral-v7", system, false) == "[SYSTEM_PROMPT] You are a helpful assistant[/SYSTEM_PROMPT]");
  CHECK(render_chat("llama2", system, false) == "[INST] You are a helpful assistant\n");
  CHECK(render_chat("llama2-sys", system, false) == "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\n");
  CHECK(render_chat("mistral", system, false) == "[INST] You are a helpful assistant\n");  // old pre-v1 name
  CHECK(render_chat("llama3", system, false) ==
        "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant<|eot_id|>");
}

TEST_CASE("one more user turn appends exactly what llama.cpp's common_chat_format_single expects") {
  const std::vector<ChatMessage> past = {
      {"system", "You are a helpful assistant"}, {"user", "Hello"}, {"assistant", "I am assistant"}};
  std::vector<ChatMessage> next = past;
  next.push_back({"user", "How are you"});
  struct Case {
    const char* name;
    const char* appended;
  };
  const Case cases[] = {
      // llama.cpp's expectation starts with one more "\n", which that helper adds for display only.
      {"chatml", "<|im_start|>user\nHow are you<|im_end|>\n<|im_start|>assistant\n"},
      {"mistral-v1", " [INST] How are you [/INST]"},
      {"mistral-v3", "[INST] How are you[/INST]"},
      {"mistral-v3-tekken", "[INST]How are you[/INST]"},
      {"mistral-v7", "[INST] How are you[/INST]"},
      {"llama2", "[INST] How are you [/INST]"},
      {"mistral", "[INST] How are you [/INST]"},
      {"llama3",
       "<|start_header_id|>user<|end_header_id|>\n\nHow are you<|eot_id|>"
       "<|start_header_id|>assistant<|end_header_id|>\n\n"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    const std::string before = render_chat(c.name, past, false);
    const std::string after = render_chat(c.name, next, true);
    REQUIRE(after.size() >= before.size());
    CHECK(after.substr(0, before.size()) == before);
    CHECK(after.substr(before.size()) == c.appended);
  }
}

TEST_CASE("without add_assistant the text ends after the last message") {
  CHECK(render(ChatTemplate::chatml, false) + "<|im_start|>assistant\n" == render(ChatTemplate::chatml));
  CHECK(render(ChatTemplate::llama3, false).ends_with("Another question<|eot_id|>"));
  CHECK(render(ChatTemplate::deepseek2, false).ends_with("User: Another question\n\n"));
  CHECK(render(ChatTemplate::deepseek3, false).ends_with("<｜User｜>Another question"));
  CHECK(render(ChatTemplate::kimi_k2, false).ends_with("Another question<|im_end|>"));
  // The [INST] families end with [/INST] whatever add_assistant says.
  for (ChatTemplate t : {ChatTemplate::llama2, ChatTemplate::llama2_sys, ChatTemplate::llama2_sys_bos,
                         ChatTemplate::llama2_sys_strip, ChatTemplate::mistral_v1, ChatTemplate::mistral_v3,
                         ChatTemplate::mistral_v3_tekken, ChatTemplate::mistral_v7, ChatTemplate::mistral_v7_tekken}) {
    CAPTURE(ns::chat::template_name(t));
    CHECK(render(t, false) == render(t, true));
  }
}

TEST_CASE("a conversation without a system message, and a single prompt") {
  const std::vector<ChatMessage> user_only = {{"user", "Continue: once upon a time"}};
  CHECK(render_chat(ChatTemplate::chatml, user_only, true) ==
        "<|im_start|>user\nContinue: once upon a time<|im_end|>\n<|im_start|>assistant\n");
  CHECK(render_chat(ChatTemplate::kimi_k2, user_only, true) ==
        "<|im_user|>user<|im_middle|>Continue: once upon a time<|im_end|><|im_assistant|>assistant<|im_middle|>");
  CHECK(render_chat(ChatTemplate::deepseek3, user_only, true) == "<｜User｜>Continue: once upon a time<｜Assistant｜>");
  CHECK(render_chat(ChatTemplate::llama2, user_only, true) == "[INST] Continue: once upon a time [/INST]");
  CHECK(render_chat(ChatTemplate::mistral_v7, user_only, true) == "[INST] Continue: once upon a time[/INST]");
}

TEST_CASE("tool messages where the family names the role in the header") {
  const std::vector<ChatMessage> with_tool = {{"user", "Weather?"}, {"tool", "{\"t\": 21}"}};
  CHECK(render_chat(ChatTemplate::chatml, with_tool, false) ==
        "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>tool\n{\"t\": 21}<|im_end|>\n");
  CHECK(render_chat(ChatTemplate::kimi_k2, with_tool, false) ==
        "<|im_user|>user<|im_middle|>Weather?<|im_end|><|im_system|>tool<|im_middle|>{\"t\": 21}<|im_end|>");
  CHECK(render_chat(ChatTemplate::llama3, with_tool, false) ==
        "<|start_header_id|>user<|end_header_id|>\n\nWeather?<|eot_id|>"
        "<|start_header_id|>tool<|end_header_id|>\n\n{\"t\": 21}<|eot_id|>");
}

TEST_CASE("roles a family cannot render are rejected, naming the message and the family") {
  const std::vector<ChatMessage> with_tool = {{"user", "Weather?"}, {"tool", "21"}};
  for (ChatTemplate t : {ChatTemplate::deepseek2, ChatTemplate::deepseek3, ChatTemplate::llama2,
                         ChatTemplate::mistral_v3, ChatTemplate::mistral_v7}) {
    CAPTURE(ns::chat::template_name(t));
    const std::string what = ns::test::expect_error(
        ns::ErrorKind::invalid_input, [&] { render_chat(t, with_tool, true); }, "expected an error");
    CHECK(ns::test::contains(what, "messages[1]"));
    CHECK(ns::test::contains(what, "\"tool\""));
    CHECK(ns::test::contains(what, ns::chat::template_name(t)));
  }
  for (ChatTemplate t : ns::chat::supported_templates()) {
    CAPTURE(ns::chat::template_name(t));
    CHECK_THROWS_WITH_AS(render_chat(t, {{"user", "a"}, {"narrator", "b"}}, true), doctest::Contains("\"narrator\""),
                         ns::Error);
    CHECK_THROWS_WITH_AS(render_chat(t, {{"", "b"}}, true), doctest::Contains("messages[0]"), ns::Error);
  }
}

TEST_CASE("an empty conversation is an error") {
  for (ChatTemplate t : ns::chat::supported_templates())
    CHECK_THROWS_WITH_AS(render_chat(t, {}, true), doctest::Contains("no messages"), ns::Error);
}

TEST_CASE("render_chat by template text detects the family first") {
  const std::string qwen_like = "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}";
  CHECK(render_chat(qwen_like, kConversation, true) == render(ChatTemplate::chatml));
  CHECK_THROWS_AS(render_chat("{{ messages }}", kConversation, true), ns::Error);
}
