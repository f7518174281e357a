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
from jinja_vectors import first_conversations, main


CONVERSATIONS = first_conversations("quotes, ampersand, newlines, unicode, markers as text", "<|sep|> role=\"x\"")


if __name__ == "__main__":
    main("kimi_k3_vectors.py", "Kimi-K3.jinja",
         {"bos_token": "[BOS]", "eos_token": "<|end_of_msg|>", "enable_thinking": True},
         "default template variables (thinking=true, thinking_effort='max').", CONVERSATIONS)
