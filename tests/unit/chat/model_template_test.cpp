// tokenizer.chat_template from GGUF files, and the override that beats it.
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/chat/model_chat_template.h"
#include "engine/gguf/gguf_file.h"
#include "engine/gguf/gguf_writer.h"
#include "common/error.h"
#include "tests/unit/error_message.h"

using ns::chat::ChatPrompter;
using ns::chat::ChatTemplate;
using ns::chat::read_chat_template;

namespace {

// A tensor-less GGUF in memory carrying the given metadata.
ns::gguf::GgufFile gguf_with(const std::string& key, ns::gguf::Value value) {
  ns::gguf::GgufWriter writer;
  writer.set("general.architecture", ns::gguf::val::str("llama"));
  writer.set(key, std::move(value));
  std::vector<uint8_t> bytes = writer.serialize_header();
  bytes.resize(writer.file_size(), 0);
  return ns::gguf::GgufFile::parse(bytes, "test.gguf");
}

const std::string kSharedVocab = std::string(NS_SHARED_DIR) + "/vocab";

}  // namespace

TEST_CASE("a template stored in GGUF metadata is read and rendered by the Jinja engine") {
  const std::string kimi =
      "{% for m in messages %}<|im_{{ m.role }}|>{{ m.role }}<|im_middle|>{{ m.content }}<|im_end|>"
      "{% endfor %}{% if add_generation_prompt %}<|im_assistant|>assistant<|im_middle|>{% endif %}";
  const auto file = gguf_with("tokenizer.chat_template", ns::gguf::val::str(kimi));
  const auto text = read_chat_template(file);
  REQUIRE(text.has_value());
  CHECK(*text == kimi);
  const ChatPrompter p("", text, "<s>", "</s>");
  CHECK(p.source() == "the GGUF's Jinja template");
  CHECK(p.render({{"user", "Hi"}}, true) ==
        "<|im_user|>user<|im_middle|>Hi<|im_end|><|im_assistant|>assistant<|im_middle|>");
  CHECK(p.render({{"user", "Hi"}}, false) == "<|im_user|>user<|im_middle|>Hi<|im_end|>");
}

TEST_CASE("a file without the key has no template; a non-string value is a bad model") {
  CHECK_FALSE(read_chat_template(gguf_with("general.name", ns::gguf::val::str("base"))).has_value());
  const auto bad = gguf_with("tokenizer.chat_template", ns::gguf::val::u32(7));
  const std::string what = ns::test::expect_error(
      ns::ErrorKind::bad_model, [&] { read_chat_template(bad); }, "expected an error");
  CHECK(ns::test::contains(what, "test.gguf"));
  CHECK(ns::test::contains(what, "tokenizer.chat_template"));
  CHECK(ns::test::contains(what, "not a string"));
}

TEST_CASE("the override wins over the GGUF's template: a family by name, or a template's text") {
  const std::optional<std::string> gguf =
      "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}";
  CHECK(ChatPrompter("", gguf, "<s>", "</s>").render({{"user", "x"}}, false) == "<s>[user]x");
  const ChatPrompter family("chatml", gguf, "<s>", "</s>");
  CHECK(family.source() == "family chatml");
  CHECK(family.render({{"user", "x"}}, true) == "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n");
  const ChatPrompter text("{{ eos_token }}{{ messages[0].content | upper }}", gguf, "<s>", "</s>");
  CHECK(text.source() == "the Jinja template given");
  CHECK(text.render({{"user", "x"}}, true) == "</s>X");
  CHECK(ChatPrompter("mistral-v7-tekken", std::nullopt, "", "").source() == "family mistral-v7-tekken");
}

TEST_CASE("a template that raises or does not parse gives its own message") {
  const std::optional<std::string> strict =
      "{% if messages[0].role != 'user' %}{{ raise_exception('Conversations must start with a user turn') }}"
      "{% endif %}{{ messages[0].content }}";
  const ChatPrompter p("", strict, "", "");
  const std::string what = ns::test::expect_error(
      ns::ErrorKind::invalid_input,
      [&] {
    p.render({{"assistant", "x"}}, true);
      },
      "expected an error");
  CHECK(ns::test::contains(what, "Conversations must start with a user turn"));
  const std::string syntax = ns::test::expect_error(
      ns::ErrorKind::invalid_input, [&] { ChatPrompter("", std::string("{% if %}"), "", ""); }, "expected an error");
  CHECK(ns::test::contains(syntax, "does not parse"));
  CHECK(ns::test::contains(syntax, "nightshift chat render"));
}

TEST_CASE("no override and no template: chat jobs cannot run, and the message says what to do") {
  for (const std::optional<std::string>& none : {std::optional<std::string>{}, std::optional<std::string>{""}}) {
    const std::string what = ns::test::expect_error(
        ns::ErrorKind::invalid_input, [&] { ChatPrompter("", none, "", ""); }, "expected an error");
    CHECK(ns::test::contains(what, "no tokenizer.chat_template"));
    CHECK(ns::test::contains(what, "plain prompt"));
    CHECK(ns::test::contains(what, ns::chat::supported_template_names()));
  }
}

TEST_CASE("real GGUF files: the Phi-3 vocabulary's template renders as Jinja, without a family of its own") {
  const std::string phi3 = kSharedVocab + "/ggml-vocab-phi-3.gguf";
  const std::string no_template = kSharedVocab + "/ggml-vocab-llama-spm.gguf";
  if (!std::filesystem::exists(phi3) || !std::filesystem::exists(no_template)) {
    MESSAGE("skipped: " << kSharedVocab << " is absent");
    return;
  }
  const auto text = read_chat_template(*ns::gguf::GgufFile::open(phi3));
  REQUIRE(text.has_value());
  CHECK(ns::chat::detect_family_name(*text) == "phi3");  // a family nightshift's built-in renderers lack
  const std::string prompt = ChatPrompter("", text, "<s>", "</s>").render({{"user", "Hello"}}, true);
  CHECK(ns::test::contains(prompt, "<|user|>"));
  CHECK(ns::test::contains(prompt, "Hello"));
  CHECK(ns::test::contains(prompt, "<|assistant|>"));
  CHECK_FALSE(read_chat_template(*ns::gguf::GgufFile::open(no_template)).has_value());
}
