# What the *_vectors.py scripts share: rendering conversations with a model's
# own Jinja template through Python jinja2, set up as llama.cpp's server sets
# up its template engine (trim_blocks, lstrip_blocks, loop controls, a
# raise_exception global), and writing the cases as JSON on stdout in the
# shape tests/unit/chat/jinja_vectors.h reads: {"note", ..., "cases": [{"name",
# "add_generation_prompt", "messages", "expected"}]}, each conversation
# rendered with and without the generation prompt.
import json
import sys

import jinja2
import jinja2.ext
import jinja2.sandbox

# Conversations every family is checked on (each script adds its own).
SYSTEM_AND_USER = [
    {"role": "system", "content": "You are a helpful assistant"},
    {"role": "user", "content": "Hello"},
]
USER_ONLY = [
    {"role": "user", "content": "Continue: once upon a time"},
]
def multi_turn(reply):
    """Two exchanges and a last question; `reply` is the second answer."""
    return [
        {"role": "system", "content": "You are a helpful assistant"},
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi there"},
        {"role": "user", "content": "Who are you"},
        {"role": "assistant", "content": reply},
        {"role": "user", "content": "Another question"},
    ]


MULTI_TURN = multi_turn("   I am an assistant   ")
ENDS_WITH_ASSISTANT = [
    {"role": "user", "content": "2+2?"},
    {"role": "assistant", "content": "4"},
]


def quotes_and_markers(markers):
    """Quotes, an ampersand, newlines, Unicode and, at the user's end, a family's own `markers` as plain text."""
    return [
        {"role": "system", "content": "  Say \"yes\" & 'no'\n\tthen stop.  \n"},
        {"role": "user", "content": "a < b && c > d\n\nÜnïcödé: 日本語, emoji 🙂, " + markers},
        {"role": "assistant", "content": "\n\"quoted\" & done\n"},
        {"role": "user", "content": ""},
    ]


def first_conversations(quotes_name, markers):
    """The five conversations the families that keep replies as written start with (gpt-oss, kimi-k3): the
    shared ones above, the quotes case named `quotes_name` with the family's own `markers`."""
    return [
        ("system and user", SYSTEM_AND_USER),
        ("user only", USER_ONLY),
        ("multi-turn with assistant replies (spaces kept)", MULTI_TURN),
        (quotes_name, quotes_and_markers(markers)),
        ("ends with an assistant turn", ENDS_WITH_ASSISTANT),
    ]


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def write_vectors(template_path, conversations, variables, note, extra_globals=None, extra_fields=None):
    """Renders each conversation with `variables` (bos_token, eos_token, ...) and prints the JSON."""
    source = open(template_path, encoding="utf-8").read()
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.globals["raise_exception"] = raise_exception
    env.globals.update(extra_globals or {})
    template = env.from_string(source)
    cases = []
    for name, messages in conversations:
        for add_generation_prompt in (True, False):
            text = template.render(messages=messages, add_generation_prompt=add_generation_prompt, **variables)
            cases.append({"name": name, "add_generation_prompt": add_generation_prompt,
                          "messages": messages, "expected": text})
    out = {"note": note.format(jinja2=jinja2.__version__)}
    out.update(extra_fields or {})
    out["cases"] = cases
    json.dump(out, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


def main(script, template, variables, settings, conversations, **more):
    """A *_vectors.py script's main: renders `conversations` with the reference's models/templates/`template`,
    whose path is the command line's argument, noting the script, jinja2's version and the `settings`."""
    write_vectors(sys.argv[1], conversations, variables,
                  "Rendered by tests/unit/chat/" + script + " with Python jinja2 {jinja2} from the reference's "
                  "models/templates/" + template + " (llama.cpp of 2026-09-28), " + settings, **more)
