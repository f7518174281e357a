#!/usr/bin/env python3
# Writes reference_templates/NAME.json: the chat templates of the 2026 families
# that only the reference's checkout has (its models/templates/, not in this
# repo or in ../shared's set; the list is TEMPLATES below and in
# reference_templates_test.cpp) rendered by Python jinja2 with every
# conversation of ../shared/chat-templates/conversations.json,
# add_generation_prompt true and false, set up as
# ../shared/chat-templates/README.md describes (the shape of its
# expected/NAME.json: [{"conversation", "add_generation_prompt",
# "output" | "error"}]). reference_templates_test.cpp renders the same through
# the Jinja engine.
#   python3 tests/unit/chat/reference_templates.py \
#       /var/tmp/ns-reference/llama.cpp/models/templates ../shared/chat-templates/conversations.json
import datetime
import json
import os
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


TEMPLATES = [
    "inclusionai-ling-3.0-flash",  # Ling / Ring 3.0 and 2.0 (bailingmoe2, bailingmoe3): the Bailing V3 template
    "deepseek-ai-DeepSeek-V4-Flash-0731",  # DeepSeek V4-Flash (deepseek4); V4 itself is in ../shared's set
    "GLM-4.7-Flash",  # the newest GLM template the reference has (glm4moe, glm-dsa)
    "MiniMax-M3",  # MiniMax-M3 (minimax-m2's successor); M2 is in ../shared's set
]


def render_all(template, conversations):
    out = []
    for conversation in conversations:
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
    return out


def main():
    templates_dir, conversations_path = sys.argv[1:3]
    env = jinja2.sandbox.SandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                              extensions=[jinja2.ext.loopcontrols, Generation])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.datetime(2026, 7, 4, 9, 30, 0).strftime(fmt)
    conversations = json.load(open(conversations_path, encoding="utf-8"))
    out_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference_templates")
    os.makedirs(out_dir, exist_ok=True)
    for name in TEMPLATES:
        source = open(os.path.join(templates_dir, name + ".jinja"), encoding="utf-8").read()
        cases = render_all(env.from_string(source), conversations)
        with open(os.path.join(out_dir, name + ".json"), "w", encoding="utf-8") as f:
            json.dump(cases, f, ensure_ascii=False, indent=1)
            f.write("\n")
        print(f"{name}: {len(cases)} renders, {sum('error' in c for c in cases)} errors")

if __name__ == "__main__":
    main()
