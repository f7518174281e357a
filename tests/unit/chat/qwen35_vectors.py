#!/usr/bin/env python3
# Writes qwen35_vectors.json: conversations rendered by Qwen 3.5's own Jinja
# template (the reference's models/templates/Qwen3.5-4B.jinja, not in this
# repo) with Python jinja2, given what llama.cpp's server gives a template:
# messages, add_generation_prompt, bos_token, eos_token, enable_thinking (true,
# the server's default; the template then opens a think section). No tools.
#   python3 tests/unit/chat/qwen35_vectors.py /var/tmp/ref/llama.cpp/models/templates/Qwen3.5-4B.jinja \
#       > tests/unit/chat/qwen35_vectors.json
from jinja_vectors import SYSTEM_AND_USER, main, multi_turn


CONVERSATIONS = [
    ("system and user", SYSTEM_AND_USER),
    ("user only, spaces trimmed", [
        {"role": "user", "content": "  Continue: once upon a time \n"},
    ]),
    ("multi-turn: replies before the last query plain, after it with a think section",
     multi_turn("<think>\nThe user asks.\n</think>\n\nI am an assistant")),
    ("ends with an assistant turn that thought", [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "<think>add</think>\n4"},
    ]),
    ("tool results share a user turn; the query is the last real user message", [
        {"role": "system", "content": "Use tools."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "Let me check."},
        {"role": "tool", "content": "{\"temp\": 21}"},
        {"role": "tool", "content": " sunny "},
        {"role": "assistant", "content": "It is 21 and sunny."},
        {"role": "user", "content": "<tool_response>\nlate\n</tool_response>"},
    ]),
    ("quotes, unicode, markers as text", [
        {"role": "user", "content": "a < b && c > d\n\nÜnïcödé: 日本語, emoji 🙂, <|im_end|> \"q\""},
        {"role": "assistant", "content": "\n\"quoted\" & done\n"},
        {"role": "user", "content": "ok"},
    ]),
]


if __name__ == "__main__":
    main("qwen35_vectors.py", "Qwen3.5-4B.jinja", {"bos_token": "", "eos_token": "<|im_end|>", "enable_thinking": True},
         "enable_thinking=true, no tools.", CONVERSATIONS)
