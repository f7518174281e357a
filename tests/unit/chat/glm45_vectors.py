#!/usr/bin/env python3
# Writes glm45_vectors.json: conversations rendered by GLM-4.5/4.6's own Jinja
# template (the reference's models/templates/GLM-4.6.jinja, GLM-4.5's format
# with the same markers; not in this repo) with Python jinja2, given what
# llama.cpp's server gives a template: messages, add_generation_prompt,
# bos_token, eos_token, enable_thinking (true: the model thinks, as by default).
#   python3 tests/unit/chat/glm45_vectors.py /var/tmp/ref/llama.cpp/models/templates/GLM-4.6.jinja \
#       > tests/unit/chat/glm45_vectors.json
from jinja_vectors import MULTI_TURN, SYSTEM_AND_USER, USER_ONLY, main, quotes_and_markers


CONVERSATIONS = [
    ("system and user", SYSTEM_AND_USER),
    ("user only", USER_ONLY),
    ("multi-turn with assistant replies (trimmed)", MULTI_TURN),
    ("quotes, ampersand, newlines, unicode, markers as text", quotes_and_markers("<|user|> [gMASK]")),
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


if __name__ == "__main__":
    main("glm45_vectors.py", "GLM-4.6.jinja",
         {"bos_token": "[gMASK]", "eos_token": "<|endoftext|>", "enable_thinking": True},
         "enable_thinking=true, no tools.", CONVERSATIONS)
