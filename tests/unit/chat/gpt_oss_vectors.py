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
import json
import sys

import jinja2
import jinja2.ext
import jinja2.sandbox

DATE = "2000-01-31"


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def strftime_now(fmt):
    assert fmt == "%Y-%m-%d", fmt
    return DATE


CONVERSATIONS = [
    ("system and user", [
        {"role": "system", "content": "You are a helpful assistant"},
        {"role": "user", "content": "Hello"},
    ]),
    ("user only", [
        {"role": "user", "content": "Continue: once upon a time"},
    ]),
    ("multi-turn with assistant replies (spaces kept)", [
        {"role": "system", "content": "You are a helpful assistant"},
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi there"},
        {"role": "user", "content": "Who are you"},
        {"role": "assistant", "content": "   I am an assistant   "},
        {"role": "user", "content": "Another question"},
    ]),
    ("quotes, newlines, unicode, markers as text", [
        {"role": "system", "content": "  Say \"yes\" & 'no'\n\tthen stop.  \n"},
        {"role": "user", "content": "a < b && c > d\n\nÜnïcödé: 日本語, emoji 🙂, <|start|>user <|message|>"},
        {"role": "assistant", "content": "\n\"quoted\" & done\n"},
        {"role": "user", "content": ""},
    ]),
    ("ends with an assistant turn", [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4"},
    ]),
    ("an empty system message adds no developer message", [
        {"role": "system", "content": ""},
        {"role": "user", "content": "Hi"},
    ]),
]


def main():
    source = open(sys.argv[1], encoding="utf-8").read()
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    template = env.from_string(source)
    cases = []
    for name, messages in CONVERSATIONS:
        for add_generation_prompt in (True, False):
            text = template.render(messages=messages, add_generation_prompt=add_generation_prompt,
                                   bos_token="<|startoftext|>", eos_token="<|return|>")
            cases.append({"name": name, "add_generation_prompt": add_generation_prompt,
                          "messages": messages, "expected": text})
    json.dump({"note": "Rendered by tests/unit/chat/gpt_oss_vectors.py with Python jinja2 " + jinja2.__version__ +
               " from the reference's models/templates/openai-gpt-oss-120b.jinja (llama.cpp of 2026-09-28), "
               "default template variables (reasoning_effort 'medium', no tools), strftime_now giving " + DATE + ".",
               "date": DATE, "cases": cases}, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
