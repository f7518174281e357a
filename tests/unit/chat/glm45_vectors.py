#!/usr/bin/env python3
# Writes glm45_vectors.json: conversations rendered by GLM-4.5/4.6's own Jinja
# template (the reference's models/templates/GLM-4.6.jinja, GLM-4.5's format
# with the same markers; not in this repo) with Python jinja2, given what
# llama.cpp's server gives a template: messages, add_generation_prompt,
# bos_token, eos_token, enable_thinking (true: the model thinks, as by default).
#   python3 tests/unit/chat/glm45_vectors.py /var/tmp/ref/llama.cpp/models/templates/GLM-4.6.jinja \
#       > tests/unit/chat/glm45_vectors.json
import sys

from jinja_vectors import MULTI_TURN, SYSTEM_AND_USER, USER_ONLY, write_vectors


CONVERSATIONS = [
    ("system and user", SYSTEM_AND_USER),
    ("user only", USER_ONLY),
    ("multi-turn with assistant replies (trimmed)", MULTI_TURN),
    ("quotes, ampersand, newlines, unicode, markers as text", [
        {"role": "system", "content": "  Say \"yes\" & 'no'\n\tthen stop.  \n"},
        {"role": "user", "content": "a < b && c > d\n\nÜnïcödé: 日本語, emoji 🙂, <|user|> [gMASK]"},
        {"role": "assistant", "content": "\n\"quoted\" & done\n"},
        {"role": "user", "content": ""},
    ]),
    ("ends with an assistant turn, empty reply", [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "  "},
    ]),
    ("reasoning in the content: kept after the last user turn, dropped before it", [
        {"role": "user", "content": "First"},
        {"role": "assistant", "content": "<think>\nold thoughts\n</think>\nold answer"},
        {"role": "user", "content": "Second"},
        {"role": "assistant", "content": "<think>  new thoughts  </think>\n\nnew answer"},
    ]),
    ("tool results", [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "Let me check."},
        {"role": "tool", "content": "{\"temp\": 21}"},
        {"role": "tool", "content": "sunny"},
        {"role": "user", "content": "Thanks"},
    ]),
]


def main():
    write_vectors(sys.argv[1], CONVERSATIONS,
                  {"bos_token": "[gMASK]", "eos_token": "<|endoftext|>", "enable_thinking": True},
                  "Rendered by tests/unit/chat/glm45_vectors.py with Python jinja2 {jinja2}"
                  " from the reference's models/templates/GLM-4.6.jinja (llama.cpp of 2026-09-28), "
                  "enable_thinking=true, no tools.")


if __name__ == "__main__":
    main()
