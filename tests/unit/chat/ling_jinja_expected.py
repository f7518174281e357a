#!/usr/bin/env python3
# Writes ling_jinja_expected.json: Ling's own chat template (the reference's
# models/templates/inclusionai-ling-3.0-flash.jinja, the Bailing V3 template;
# not in this repo) rendered by Python jinja2 with every conversation of
# ../shared/chat-templates/conversations.json, add_generation_prompt true and
# false, set up as ../shared/chat-templates/README.md describes (the shape of
# its expected/NAME.json: [{"conversation", "add_generation_prompt",
# "output" | "error"}]). ling_template_test.cpp renders the same through the
# Jinja engine.
#   python3 tests/unit/chat/ling_jinja_expected.py \
#       /var/tmp/ns-reference/llama.cpp/models/templates/inclusionai-ling-3.0-flash.jinja \
#       ../shared/chat-templates/conversations.json > tests/unit/chat/ling_jinja_expected.json
import datetime
import json
import sys

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.sandbox


class Generation(jinja2.ext.Extension):
    """transformers' {% generation %} ... {% endgeneration %}: renders its body."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.Scope(body, lineno=lineno)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def main():
    template_path, conversations_path = sys.argv[1:3]
    env = jinja2.sandbox.SandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                              extensions=[jinja2.ext.loopcontrols, Generation])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.datetime(2026, 7, 4, 9, 30, 0).strftime(fmt)
    template = env.from_string(open(template_path, encoding="utf-8").read())
    out = []
    for conversation in json.load(open(conversations_path, encoding="utf-8")):
        for agp in (True, False):
            case = {"conversation": conversation["name"], "add_generation_prompt": agp}
            variables = {"messages": conversation["messages"], "add_generation_prompt": agp,
                         "bos_token": "<s>", "eos_token": "</s>"}
            if "tools" in conversation:
                variables["tools"] = conversation["tools"]
            try:
                case["output"] = template.render(**variables)
            except Exception as e:  # noqa: BLE001 (any error the template raises is the expected outcome)
                case["error"] = f"{type(e).__name__}: {e}"
            out.append(case)
    json.dump(out, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
