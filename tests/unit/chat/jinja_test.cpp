// The Jinja engine's language features, one case each; the expected strings
// were checked against Python jinja2 3.1 with the settings transformers uses
// (SandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols).
#include "engine/chat/jinja.h"
#include "tests/unit/chat/template_files.h"

#include <doctest/doctest.h>

#include <ctime>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "common/error.h"

using nlohmann::ordered_json;
using ns::chat::jinja::RenderOptions;
using ns::chat::jinja::Template;

namespace {

// 2026-07-04 09:30:00 UTC.
RenderOptions fixed_time() {
  RenderOptions o;
  o.has_now = true;
  o.now = ns::test::rendered_at();
  return o;
}

std::string render(const std::string& source, const char* context = "{}") {
  return Template(source).render(ordered_json::parse(context), fixed_time());
}

// The message of the error rendering raises ("" if none).
std::string render_error(const std::string& source, const char* context = "{}", const RenderOptions& o = {}) {
  try {
    Template(source).render(ordered_json::parse(context), o);
  } catch (const ns::Error& e) {
    CHECK(e.kind() == ns::ErrorKind::invalid_input);
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("jinja: whitespace: {%- -%} strip all whitespace") {
  CHECK(render("a  \n  {%- if true -%}  \n b \n {%- endif -%}\n  c") == "abc");
}

TEST_CASE("jinja: whitespace: {{- -}} strip") { CHECK(render("x   {{- 1 -}}   y") == "x1y"); }

TEST_CASE("jinja: trim_blocks drops one newline after a block tag") {
  CHECK(render("{% if true %}\nA\n{% endif %}\nB") == "A\nB");
}

TEST_CASE("jinja: lstrip_blocks drops indentation before a block tag") {
  CHECK(render("X\n    {% if true %}\n    Y\n    {% endif %}\nZ") == "X\n    Y\nZ");
}

TEST_CASE("jinja: lstrip_blocks leaves {{ }} indentation") { CHECK(render("  {{ 1 }}\n") == "  1"); }

TEST_CASE("jinja: {%+ keeps indentation and +%} keeps the newline") {
  CHECK(render("  {%+ if true +%}\nA{% endif %}") == "  \nA");
}

TEST_CASE("jinja: comments vanish, with their whitespace rules") {
  CHECK(render("a\n  {# note #}\nb{#- x -#}  c") == "a\nbc");
}

TEST_CASE("jinja: raw blocks print tags as text") { CHECK(render("{% raw %}{{ x }}{% endraw %}") == "{{ x }}"); }

TEST_CASE("jinja: the final newline is dropped") { CHECK(render("a\n") == "a"); }

TEST_CASE("jinja: loop variables") {
  CHECK(render("{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.last "
               "}}{{ loop.length }}|{% endfor %}") == "103TrueFalse3|212FalseFalse3|321FalseTrue3|");
}

TEST_CASE("jinja: loop.previtem, nextitem and cycle") {
  CHECK(render("{% for x in [1,2,3] %}{{ loop.previtem }}<{{ x }}>{{ loop.nextitem }} {{ loop.cycle('a','b') }};{% "
               "endfor %}") == "<1>2 a;1<2>3 b;2<3> a;");
}

TEST_CASE("jinja: for else, inline if filter, break, continue") {
  CHECK(render("{% for x in range(10) if x is odd %}{% if x == 7 %}{% break %}{% endif %}{% if x == 3 %}{% continue "
               "%}{% endif %}{{ x }}{% endfor %}|{% for x in [] %}x{% else %}empty{% endfor %}") == "15|empty");
}

TEST_CASE("jinja: tuple unpacking over items()") {
  CHECK(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", R"json({"d": {"b": 1, "a": 2}})json") ==
        "b=1;a=2;");
}

TEST_CASE("jinja: set inside a loop does not leak; namespace does") {
  CHECK(render("{% set n = 0 %}{% set ns = namespace(n=0) %}{% for x in [1,2,3] %}{% set n = n + x %}{% set ns.n = "
               "ns.n + x %}{% endfor %}{{ n }} {{ ns.n }}") == "0 6");
}

TEST_CASE("jinja: block set and filter blocks") {
  CHECK(render("{% set b %}Hi {{ name }}{% endset %}{{ b | upper }} {% filter lower %}ABC{% endfilter %}",
               R"json({"name": "Bo"})json") == "HI BO abc");
}

TEST_CASE("jinja: macros with defaults, keyword args and caller") {
  CHECK(render("{% macro m(a, b='B') %}[{{ a }}{{ b }}{{ caller() if caller is defined else '' }}]{% endmacro %}{{ "
               "m(1) }}{{ m(2, b='x') }}{% call m(3) %}inner{% endcall %}") == "[1B][2x][3Binner]");
}

TEST_CASE("jinja: recursive macro") {
  CHECK(render("{% macro f(n) %}{{ n }}{% if n > 0 %}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}") == "3210");
}

TEST_CASE("jinja: slicing by code point, negative and step") {
  CHECK(
      render("{{ s[1:3] }}|{{ s[-2:] }}|{{ s[::-1] }}|{{ s[::2] }}|{{ l[1:] }}|{{ l[:-1] }}|{{ s[0] }}|{{ s|length }}",
             R"json({"s": "héllo🚀", "l": [1, 2, 3]})json") == "él|o🚀|🚀olléh|hlo|[2, 3]|[1, 2]|h|6");
}

TEST_CASE("jinja: python str() of values") {
  CHECK(render("{{ [1, 'a', none, true, 1.5, {'k': 'v'}] }} {{ (1,) }} {{ none }} {{ 1e20 }} {{ 0.1 + 0.2 }} {{ 3 / 2 "
               "}} {{ 7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }}") ==
        "[1, 'a', None, True, 1.5, {'k': 'v'}] (1,) None 1e+20 0.30000000000000004 1.5 3 2 1024");
}

TEST_CASE("jinja: repr of strings picks its quotes") {
  CHECK(render("{{ [\"it's\", 'say \"hi\"', 'a\\nb'] }}") == "[\"it's\", 'say \"hi\"', 'a\\nb']");
}

TEST_CASE("jinja: tojson formatting") {
  CHECK(
      render(
          "{{ d | tojson }}|{{ d | tojson(indent=2) }}|{{ d | tojson(sort_keys=true) }}|{{ d | tojson(separators=(',', "
          "':')) }}|{{ 'é' | tojson }}|{{ 'é🚀' | tojson(ensure_ascii=true) }}|{{ [] | tojson(indent=2) }}",
          R"json({"d": {"z": [1, 2.5, null, true], "a": "q\"\n"}})json") ==
      "{\"z\": [1, 2.5, null, true], \"a\": \"q\\\"\\n\"}|{\n  \"z\": [\n    1,\n    2.5,\n    null,\n    true\n  ],\n "
      " \"a\": \"q\\\"\\n\"\n}|{\"a\": \"q\\\"\\n\", \"z\": [1, 2.5, null, "
      "true]}|{\"z\":[1,2.5,null,true],\"a\":\"q\\\"\\n\"}|\"é\"|\"\\u00e9\\ud83d\\ude80\"|[]");
}

TEST_CASE("jinja: tojson floats as python prints them") {
  CHECK(render("{{ [1.0, 0.1, 1e-05, 123456789012345678.0, 1.5e300, -0.0] | tojson }}") ==
        "[1.0, 0.1, 1e-05, 1.2345678901234568e+17, 1.5e+300, -0.0]");
}

TEST_CASE("jinja: string methods") {
  CHECK(render("{{ '  a b  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ "
               "'a b c'.split(' ', 1) }}|{{ 'a b c'.rsplit(' ', 1) }}|{{ 'abc'.startswith('ab') }}|{{ "
               "'abc'.endswith(('x','c')) }}|{{ 'hello'.replace('l', 'L', 1) }}|{{ 'ab'.upper() }}|{{ 'hi "
               "there'.title() }}|{{ 'abcb'.find('b') }}|{{ 'abcb'.count('b') }}|{{ '{}-{}'.format(1, 'x') }}") ==
        "a b|a|['a', 'b', '', 'c']|['a', 'b']|['a', 'b c']|['a b', 'c']|True|True|heLlo|AB|Hi There|1|2|1-x");
}

TEST_CASE("jinja: list and dict methods") {
  CHECK(render("{% set l = [3, 1] %}{{ l.append(5) or '' }}{{ l }}|{{ l.pop() }}|{{ l.index(1) }}|{% set d = {'a': 1} "
               "%}{{ d.get('a') }}{{ d.get('b', 'z') }}{{ d.get('c') }}|{{ d.keys() | list }}{{ d.values() | list "
               "}}|{% set _ = d.update({'b': 2}) %}{{ d }}") == "[3, 1, 5]|5|1|1zNone|['a'][1]|{'a': 1, 'b': 2}");
}

TEST_CASE("jinja: filters") {
  CHECK(
      render("{{ '  x ' | trim }}|{{ [3,1,2] | sort }}|{{ [3,1,2] | sort(reverse=true) | join(',') }}|{{ ['b','A','a'] "
             "| unique | list }}|{{ {'b': 1, 'a': 2} | dictsort }}|{{ [1,2,3] | first }}{{ [1,2,3] | last }}|{{ 'abc' "
             "| reverse }}|{{ 'x' | default('d') }}{{ u | default('d') }}{{ '' | default('e', true) }}|{{ '12' | int + "
             "1 }}|{{ '1.5' | float }}|{{ 2.5 | round }}|{{ 2.567 | round(2) }}|{{ -3 | abs }}|{{ 'a\nb' | indent(2) "
             "}}|{{ 'a\nb' | indent(2, first=true) }}|{{ 'hello world' | wordcount }}|{{ 'ab' | center(6) }}|") ==
      "x|[1, 2, 3]|3,2,1|['b', 'A']|[('a', 2), ('b', 1)]|13|cba|xde|13|1.5|2.0|2.57|3|a\n  b|  a\n  b|2|  ab  |");
}

TEST_CASE("jinja: selectattr, rejectattr, map, select") {
  CHECK(
      render(
          "{{ ms | selectattr('role', 'equalto', 'user') | map(attribute='c') | join(',') }}|{{ ms | "
          "rejectattr('role', 'eq', 'user') | map(attribute='c') | list }}|{{ [1,2,3,4] | select('even') | list }}|{{ "
          "[1,2,3,4] | reject('divisibleby', 3) | list }}|{{ ['a','b'] | map('upper') | list }}|{{ ms | "
          "map(attribute='x', default='-') | join }}|{{ [1,2,3,4,5] | batch(2) | list }}",
          R"json({"ms": [{"role": "user", "c": "u1"}, {"role": "assistant", "c": "a1"}, {"role": "user", "c": "u2"}]})json") ==
      "u1,u2|['a1']|[2, 4]|[1, 2, 4]|['A', 'B']|---|[[1, 2], [3, 4], [5]]");
}

TEST_CASE("jinja: tests") {
  CHECK(
      render(
          "{{ u is defined }}{{ u is undefined }}{{ none is none }}{{ 'a' is string }}{{ {} is mapping }}{{ [] is "
          "iterable }}{{ 'a' is sequence }}{{ 1 is number }}{{ 1 is integer }}{{ true is integer }}{{ true is boolean "
          "}}{{ 1.0 is float }}{{ true is true }}{{ false is false }}{{ 4 is even }}{{ 3 is odd }}{{ 6 is divisibleby "
          "3 }}{{ 1 is eq 1 }}{{ 1 is ne 2 }}{{ 1 is lt 2 }}{{ 3 is gt 2 }}{{ 1 is in [1] }}{{ 'a' is not string }}") ==
      "FalseTrueTrueTrueTrueTrueTrueTrueTrueFalseTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueFalse");
}

TEST_CASE("jinja: operators: in, not in, ~, comparisons, conditional") {
  CHECK(render("{{ 'b' in 'abc' }}{{ 2 not in [1] }}{{ 'k' in {'k': 1} }}{{ 1 ~ 'a' ~ none }}{{ 1 < 2 < 3 }}{{ 'x' if "
               "false else 'y' }}{{ 'x' if false }}{{ true and 'v' }}{{ 0 or 'w' }}{{ not 0 }}{{ 1 == 1.0 }}{{ 'a' + "
               "'b' }}{{ [1] + [2] }}{{ 'ab' * 2 }}") == "TrueTrueTrue1aNoneTrueyvwTrueTrueab[1, 2]abab");
}

TEST_CASE("jinja: undefined values print as empty and are falsy") {
  CHECK(render("[{{ u }}][{{ d.missing }}][{{ u | length }}][{% if not d.missing %}no{% endif %}][{% for x in u %}x{% "
               "endfor %}]",
               R"json({"d": {}})json") == "[][][0][no][]");
}

TEST_CASE("jinja: attribute access on dicts falls back to keys, methods first") {
  CHECK(render("{{ d.name }}|{{ d['name'] }}|{{ d.items is defined }}|{{ d['items'] }}",
               R"json({"d": {"name": "n", "items": 3}})json") == "n|n|True|3");
}

TEST_CASE("jinja: strftime_now and string escapes") {
  CHECK(render("{{ strftime_now('%Y-%m-%d %H:%M') }}|{{ 'tab\\there\\u00e9\\x41' }}") ==
        "2026-07-04 09:30|tab\thereéA");
}

TEST_CASE("jinja: generation blocks render their body") {
  CHECK(render("a{% generation %}b{% endgeneration %}c") == "abc");
}
TEST_CASE("jinja: errors carry the template's message") {
  CHECK(render_error("{{ raise_exception('bad role') }}").find("bad role") != std::string::npos);
  CHECK(render_error("{{ u.x }}").find("'u' is undefined") != std::string::npos);
  CHECK(render_error("{{ 'a' + 1 }}").find("can only concatenate str") != std::string::npos);
  CHECK(render_error("{{ [1] | map('string') | tojson }}").find("not JSON serializable") != std::string::npos);
  CHECK(render_error("{% for a, b in [[1, 2, 3]] %}{% endfor %}").find("too many values to unpack") !=
        std::string::npos);
  CHECK(render_error("{{ d.missing.x }}", R"({"d": {}})").find("'dict object' has no attribute 'missing'") !=
        std::string::npos);
}

TEST_CASE("jinja: an unknown filter fails only where it runs") {
  CHECK(render("{% if x %}{{ 1 | nofilter }}{% endif %}ok", R"({"x": false})") == "ok");
  CHECK(render_error("{{ 1 | nofilter }}").find("No filter named 'nofilter'") != std::string::npos);
}

TEST_CASE("jinja: syntax errors throw when the template is parsed") {
  auto parse = [](const char* s) {
    try {
      Template t(s);
    } catch (const ns::Error& e) {
      CHECK(e.kind() == ns::ErrorKind::invalid_input);
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(parse("{% if x %}no end").find("TemplateSyntaxError") == 0);
  CHECK(parse("{{ 1 + }}").find("TemplateSyntaxError") == 0);
  CHECK(parse("{% frobnicate %}").find("unknown tag 'frobnicate'") != std::string::npos);
  CHECK(parse("{{ 'open").find("TemplateSyntaxError") == 0);
  CHECK(parse("{# open").find("TemplateSyntaxError") == 0);
}

TEST_CASE("jinja: runaway templates stop at the limits") {
  CHECK(render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").find("nest deeper than") !=
        std::string::npos);
  RenderOptions small;
  small.max_output_bytes = 1000;
  CHECK(render_error("{% for i in range(100) %}0123456789-{% endfor %}", "{}", small).find("exceeds 1000 bytes") !=
        std::string::npos);
  CHECK(render("{% for i in range(90) %}0123456789-{% endfor %}").size() == 990);
}

TEST_CASE("jinja: tojson keeps the input's key order") {
  CHECK(render("{{ t | tojson }}", R"({"t": {"zeta": 1, "alpha": {"y": 2, "b": 3}}})") ==
        R"({"zeta": 1, "alpha": {"y": 2, "b": 3}})");
}

TEST_CASE("jinja: one parsed template renders on several threads") {
  const Template t("{% for m in messages %}{{ m.role }}:{{ m.content | upper }};{% endfor %}");
  const auto ctx =
      ordered_json::parse(R"({"messages": [{"role": "user", "content": "a"}, {"role": "bot", "content": "b"}]})");
  std::string results[4];
  std::thread threads[4];
  for (int k = 0; k < 4; ++k)
    threads[k] = std::thread([&, k] {
      for (int n = 0; n < 200; ++n) results[k] = t.render(ctx);
    });
  for (auto& th : threads) th.join();
  for (const auto& r : results) CHECK(r == "user:A;bot:B;");
}

TEST_CASE("jinja: render_chat_template passes transformers' variables") {
  const auto messages = ordered_json::parse(R"([{"role": "user", "content": "hi"}])");
  const auto tools = ordered_json::parse(R"([{"name": "f"}])");
  const std::string src =
      "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}{% if tools is defined %}{{ tools | length }}"
      "{% endif %}{% if add_generation_prompt %}>{% endif %}{{ eos_token }}";
  CHECK(ns::chat::jinja::render_chat_template(src, messages, &tools, true, "<s>", "</s>", 0) == "<s>hi1></s>");
  CHECK(ns::chat::jinja::render_chat_template(src, messages, nullptr, false, "B", "E", 0) == "BhiE");
}

TEST_CASE("jinja: case mapping beyond ASCII, as Python's str methods") {
  CHECK(render("{{ s | upper }}", R"({"s": "ĀāĹĺŹźÿŸßΣσςДдЁё"})") == "ĀĀĹĹŹŹŸŸSSΣΣΣДДЁЁ");
  CHECK(render("{{ s | lower }}", R"({"s": "ĀāĹĺŹźÿŸΣσςДдЁё"})") == "āāĺĺźźÿÿσσςддёё");
  CHECK(render("{{ 'élan vital' | title }}|{{ 'ÉLAN'.capitalize() }}") == "Élan Vital|Élan");
}

TEST_CASE("jinja: macro varargs is a tuple; attr reads no dict keys") {
  CHECK(render("{% macro x(a) %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ x(1, 2, 3, z=4) }}") == "(2, 3){'z': 4}");
  CHECK(render("[{{ d | attr('role') }}][{{ d.role }}]", R"({"d": {"role": "user"}})") == "[][user]");
}

TEST_CASE("jinja: recursive loops") {
  CHECK(
      render(
          "{% for item in tree recursive %}<{{ item.name }}{{ loop.depth }}{% if item.children %}[{{ "
          "loop(item.children) }}]{% endif %}>{% endfor %}",
          R"({"tree": [{"name": "a", "children": [{"name": "b", "children": []}, {"name": "c"}]}, {"name": "d"}]})") ==
      "<a1[<b2><c2>]><d1>");
}

TEST_CASE("jinja: nesting past the parser's limit is a syntax error, not a crash") {
  std::string deep(5000, '(');
  deep = "{{ " + deep + "1" + std::string(5000, ')') + " }}";
  CHECK_THROWS_AS(Template{deep}, ns::Error);
  std::string ifs;
  for (int k = 0; k < 1000; ++k) ifs += "{% if true %}";
  CHECK_THROWS_AS(Template{ifs}, ns::Error);
  CHECK(render("{{ ((((1)))) }}{{ - - 2 }}{{ not not 1 }}") == "12True");
}

TEST_CASE("jinja: raw keeps the newline after {% raw %}, trims the one after {% endraw %}") {
  CHECK(render("{% raw %}\nA\n{% endraw %}\nB") == "\nA\nB");
  CHECK(render("  {% raw -%}\n A \n  {%- endraw %}\nB") == "AB");
}

TEST_CASE("jinja: loop.changed") {
  CHECK(render("{% for x in [1, 1, 2, 2, 1] %}{{ loop.changed(x) }}{% endfor %}") == "TrueFalseTrueFalseTrue");
}
