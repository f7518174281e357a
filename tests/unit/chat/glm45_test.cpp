// GLM-4.5 / 4.6 rendering checked against the models' own Jinja template: the
// expected prompts in glm45_vectors.json were rendered by Python jinja2 from
// the reference's models/templates/GLM-4.6.jinja (glm45_vectors.py beside this
// file writes them and says how).
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/chat/chat_template.h"
#include "common/error.h"
#include "tests/unit/chat/jinja_vectors.h"

using ns::chat::ChatMessage;
using ns::chat::ChatTemplate;
using ns::chat::render_chat;

TEST_CASE("glm-4.5 renders every conversation exactly as GLM-4.6's Jinja template does") {
  ns::test::check_jinja_vectors("glm45_vectors.json", ChatTemplate::glm45, "glm-4.5", 14);
}

TEST_CASE("glm-4.5: replies are stripped as Python strips, Unicode spaces included") {
  // U+3000 and U+00A0 around the reply, U+2003 inside it.
  const std::vector<ChatMessage> m = {{"user", "q"},
                                      {"assistant",
                                       "\xe3\x80\x80 a\xe2\x80\x83"
                                       "b \xc2\xa0"}};
  CHECK(render_chat(ChatTemplate::glm45, m, false) ==
        "[gMASK]<sop><|user|>\nq<|assistant|>\n<think></think>\na\xe2\x80\x83"
        "b");
  const std::vector<ChatMessage> blank = {{"assistant", "\xe2\x80\xa8\t"}};
  CHECK(render_chat(ChatTemplate::glm45, blank, true) == "[gMASK]<sop><|assistant|>\n<think></think><|assistant|>");
}

TEST_CASE("glm-4.5 rejects roles it has no turn for") {
  CHECK_THROWS_WITH_AS(
      render_chat(ChatTemplate::glm45, {{"user", "Hi"}, {"critic", "no"}}, true),
      doctest::Contains("messages[1] has role \"critic\", which the glm-4.5 chat template cannot render"), ns::Error);
}
