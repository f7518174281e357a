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

using ns::chat::ChatTemplate;
using ns::chat::read_chat_template;
using ns::chat::resolve_chat_template;

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

TEST_CASE("a template stored in GGUF metadata is read and detected") {
  const std::string kimi = "{{ '<|im_assistant|>assistant<|im_middle|>' }}";
  const auto file = gguf_with("tokenizer.chat_template", ns::gguf::val::str(kimi));
  const auto text = read_chat_template(file);
  REQUIRE(text.has_value());
  CHECK(*text == kimi);
  CHECK(resolve_chat_template("", text) == ChatTemplate::kimi_k2);
}

TEST_CASE("a file without the key has no template; a non-string value is a bad model") {
  CHECK_FALSE(read_chat_template(gguf_with("general.name", ns::gguf::val::str("base"))).has_value());
  const auto bad = gguf_with("tokenizer.chat_template", ns::gguf::val::u32(7));
  const std::string what =
      ns::test::expect_error(ns::ErrorKind::bad_model, [&] { read_chat_template(bad); }, "expected an error");
  CHECK(ns::test::contains(what, "test.gguf"));
  CHECK(ns::test::contains(what, "tokenizer.chat_template"));
  CHECK(ns::test::contains(what, "not a string"));
}

TEST_CASE("the override wins over the GGUF's template, by name or by text") {
  const std::optional<std::string> qwen = "{{ '<|im_start|>' + message.role }}";
  CHECK(resolve_chat_template("", qwen) == ChatTemplate::chatml);
  CHECK(resolve_chat_template("deepseek3", qwen) == ChatTemplate::deepseek3);
  CHECK(resolve_chat_template("{{ '<|start_header_id|>' }}{{ '<|end_header_id|>' }}", qwen) == ChatTemplate::llama3);
  CHECK(resolve_chat_template("mistral-v7-tekken", std::nullopt) == ChatTemplate::mistral_v7_tekken);
  CHECK_THROWS_WITH_AS(resolve_chat_template("no-such-family", qwen), doctest::Contains("unknown chat template"),
                       ns::Error);
}

TEST_CASE("no override and no template: chat jobs cannot run, and the message says what to do") {
  for (const std::optional<std::string>& none : {std::optional<std::string>{}, std::optional<std::string>{""}}) {
    const std::string what = ns::test::expect_error(
        ns::ErrorKind::invalid_input, [&] { resolve_chat_template("", none); }, "expected an error");
    CHECK(ns::test::contains(what, "no tokenizer.chat_template"));
    CHECK(ns::test::contains(what, "plain prompt"));
    CHECK(ns::test::contains(what, ns::chat::supported_template_names()));
  }
}

TEST_CASE("real GGUF files: the Phi-3 vocabulary's template is named as llama.cpp's phi3") {
  const std::string phi3 = kSharedVocab + "/ggml-vocab-phi-3.gguf";
  const std::string no_template = kSharedVocab + "/ggml-vocab-llama-spm.gguf";
  if (!std::filesystem::exists(phi3) || !std::filesystem::exists(no_template)) {
    MESSAGE("skipped: " << kSharedVocab << " is absent");
    return;
  }
  const auto text = read_chat_template(*ns::gguf::GgufFile::open(phi3));
  REQUIRE(text.has_value());
  CHECK(ns::chat::detect_family_name(*text) == "phi3");
  CHECK_THROWS_WITH_AS(resolve_chat_template("", text), doctest::Contains("\"phi3\" family"), ns::Error);
  CHECK(resolve_chat_template("chatml", text) == ChatTemplate::chatml);
  CHECK_FALSE(read_chat_template(*ns::gguf::GgufFile::open(no_template)).has_value());
}
