#!/usr/bin/env python3
# Writes glm45_vectors.json: conversations rendered by GLM-4.5/4.6's own Jinja
# template (the reference's models/templates/GLM-4.6.jinja, GLM-4.5's format
# with the same markers; not in this repo) with Python jinja2, given what
# llama.cpp's server gives a template: messages, add_generation_prompt,
# bos_token, eos_token, enable_thinking (true: the model thinks, as by default).
#   python3 tests/unit/chat/glm45_vectors.py /var/tmp/ref/llama.cpp/models/templates/GLM-4.6.jinja \
#       > tests/unit/chat/glm45_vectors.json
import json
import sys

import jinja2
import jinja2.ext
import jinja2.sandbox


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


CONVERSATIONS = [
    ("system and user", [
        {"role": "system", "content": "You are a helpful assistant"},
        {"role": "user", "content": "Hello"},
    ]),
    ("user only", [
        {"role": "user", "content": "Continue: once upon a time"},
    ]),
    ("multi-turn with assistant replies (trimmed)", [
        {"role": "system", "content": "You are a helpful assistant"},
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi there"},
        {"role": "user", "content": "Who are you"},
        {"role": "assistant", "content": "   I am an assistant   "},
        {"role": "user", "content": "Another question"},
    ]),
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
    source = open(sys.argv[1], encoding="utf-8").read()
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.globals["raise_exception"] = raise_exception
    template = env.from_string(source)
    cases = []
    for name, messages in CONVERSATIONS:
        for add_generation_prompt in (True, False):
            text = template.render(messages=messages, add_generation_prompt=add_generation_prompt,
                                   bos_token="[gMASK]", eos_token="<|endoftext|>", enable_thinking=True)
            cases.append({"name": name, "add_generation_prompt": add_generation_prompt,
                          "messages": messages, "expected": text})
    json.dump({"note": "Rendered by tests/unit/chat/glm45_vectors.py with Python jinja2 " + jinja2.__version__ +
               " from the reference's models/templates/GLM-4.6.jinja (llama.cpp of 2026-09-28), "
               "enable_thinking=true, no tools.",
               "cases": cases}, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
