#!/usr/bin/env python3
# Writes gpt_oss_vectors.json: conversations rendered by gpt-oss's own Jinja
# template (the "harmony" format; the reference's
# models/templates/openai-gpt-oss-120b.jinja, not in this repo) with Python
# jinja2, given what llama.cpp's server gives a template: messages,
# add_generation_prompt, bos_token, eos_token. The template's own switches
# (model_identity, reasoning_effort, builtin_tools, tools) are left undefined,
# so its defaults apply, as with llama.cpp's server. strftime_now, which the
# template calls for "Current date:", returns the fixed DATE below; the test
# puts the day it runs on in its place.
#   python3 tests/unit/chat/gpt_oss_vectors.py /var/tmp/ref/llama.cpp/models/templates/openai-gpt-oss-120b.jinja \
#       > tests/unit/chat/gpt_oss_vectors.json
from jinja_vectors import first_conversations, main

DATE = "2000-01-31"


def strftime_now(fmt):
    assert fmt == "%Y-%m-%d", fmt
    return DATE


CONVERSATIONS = first_conversations("quotes, newlines, unicode, markers as text", "<|start|>user <|message|>") + [
    ("an empty system message adds no developer message", [
        {"role": "system", "content": ""},
        {"role": "user", "content": "Hi"},
    ]),
]


if __name__ == "__main__":
    main("gpt_oss_vectors.py", "openai-gpt-oss-120b.jinja", {"bos_token": "<|startoftext|>", "eos_token": "<|return|>"},
         "default template variables (reasoning_effort 'medium', no tools), strftime_now giving " + DATE + ".",
         CONVERSATIONS, extra_globals={"strftime_now": strftime_now}, extra_fields={"date": DATE})
