#!/usr/bin/env python3
# Writes kimi_k3_vectors.json: conversations rendered by Kimi K3's own Jinja
# template (the reference's models/templates/Kimi-K3.jinja, not in this repo)
# with Python jinja2, given what llama.cpp's server gives a template:
# messages, add_generation_prompt, bos_token, eos_token, enable_thinking.
# Kimi K3's template reads none of bos_token/eos_token/enable_thinking; its own
# switches `thinking` (default true) and `thinking_effort` (default 'max') are
# left undefined, so the defaults apply, as with llama.cpp's server.
#   python3 tests/unit/chat/kimi_k3_vectors.py /var/tmp/ref/llama.cpp/models/templates/Kimi-K3.jinja \
#       > tests/unit/chat/kimi_k3_vectors.json
import sys

from jinja_vectors import ENDS_WITH_ASSISTANT, MULTI_TURN, SYSTEM_AND_USER, USER_ONLY, write_vectors


CONVERSATIONS = [
    ("system and user", SYSTEM_AND_USER),
    ("user only", USER_ONLY),
    ("multi-turn with assistant replies (spaces kept)", MULTI_TURN),
    ("quotes, ampersand, newlines, unicode, markers as text", [
        {"role": "system", "content": "  Say \"yes\" & 'no'\n\tthen stop.  \n"},
        {"role": "user", "content": "a < b && c > d\n\nÜnïcödé: 日本語, emoji 🙂, <|sep|> role=\"x\""},
        {"role": "assistant", "content": "\n\"quoted\" & done\n"},
        {"role": "user", "content": ""},
    ]),
    ("ends with an assistant turn", ENDS_WITH_ASSISTANT),
]


def main():
    write_vectors(sys.argv[1], CONVERSATIONS,
                  {"bos_token": "[BOS]", "eos_token": "<|end_of_msg|>", "enable_thinking": True},
                  "Rendered by tests/unit/chat/kimi_k3_vectors.py with Python jinja2 {jinja2}"
                  " from the reference's models/templates/Kimi-K3.jinja (llama.cpp of 2026-09-28), "
                  "default template variables (thinking=true, thinking_effort='max').")


if __name__ == "__main__":
    main()
