// Tool calls read back out of generated text (tool_calls.h). One parser per
// markup, each written from the family's chat template (how it renders an
// assistant message's tool_calls, and what its generation prompt opens).
#include "engine/chat/tool_calls.h"

#include <cstddef>
#include <functional>
#include <initializer_list>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

namespace ns::chat {

namespace {

using ojson = nlohmann::ordered_json;
using std::string_view;
constexpr size_t npos = string_view::npos;

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

string_view ltrim(string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  return s;
}

string_view rtrim(string_view s) {
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

string_view trim(string_view s) { return rtrim(ltrim(s)); }

bool starts_with(string_view s, string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

bool ends_with(string_view s, string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Drops `prefix` from the front of `s` (or `suffix` from its back) when it is there.
bool consume(string_view& s, string_view prefix) {
  if (!starts_with(s, prefix)) return false;
  s.remove_prefix(prefix.size());
  return true;
}

bool consume_suffix(string_view& s, string_view suffix) {
  if (!ends_with(s, suffix)) return false;
  s.remove_suffix(suffix.size());
  return true;
}

bool contains(const std::string& s, string_view what) { return s.find(what) != std::string::npos; }

// ---- JSON -------------------------------------------------------------------

std::optional<ojson> parse_json(string_view s) {
  ojson j = ojson::parse(s.begin(), s.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

// Compact, UTF-8 kept as is; invalid UTF-8 in a string (an XML-ish value taken
// verbatim) becomes U+FFFD instead of throwing.
std::string dump(const ojson& j) { return j.dump(-1, ' ', false, ojson::error_handler_t::replace); }

// A call's arguments as a compact JSON object text, or nullopt when they are
// not a JSON object. Nothing at all is an empty object; a JSON string holding
// an object (a template that ran tojson over an arguments string) is unwrapped.
std::optional<std::string> normalize_arguments(string_view text) {
  text = trim(text);
  if (text.empty()) return std::string("{}");
  std::optional<ojson> j = parse_json(text);
  if (!j) return std::nullopt;
  if (j->is_string()) {
    std::optional<ojson> inner = parse_json(j->get_ref<const std::string&>());
    if (inner && inner->is_object()) j = std::move(inner);
  }
  if (!j->is_object()) return std::nullopt;
  return dump(*j);
}

// A parameter value of an XML-ish format: JSON when it parses, else the text.
ojson xml_value(string_view raw) {
  if (std::optional<ojson> j = parse_json(trim(raw))) return *std::move(j);
  return ojson(std::string(raw));
}

// ---- the reply being built --------------------------------------------------

struct Call {
  std::string id;  // empty: call_<i>
  std::string name;
  std::string arguments;
};

struct Builder {
  std::string content;
  std::string reasoning;
  std::vector<ToolCall> calls;
  bool extracted = false;  // reasoning or markup was taken out: content is trimmed

  void add_reasoning(string_view r) {
    extracted = true;
    r = trim(r);
    if (r.empty()) return;
    if (!reasoning.empty()) reasoning += "\n";
    reasoning += r;
  }

  void add_calls(std::vector<Call>&& found) {
    extracted = true;
    for (Call& c : found) {
      std::string id = c.id.empty() ? "call_" + std::to_string(calls.size()) : std::move(c.id);
      calls.push_back({std::move(id), std::move(c.name), std::move(c.arguments)});
    }
  }

  ParsedReply finish() && {
    ParsedReply r;
    r.content = extracted ? std::string(trim(content)) : std::move(content);
    r.reasoning_content = std::move(reasoning);
    r.tool_calls = std::move(calls);
    return r;
  }
};

// A block's body parsed into calls; false when it is not a well-formed list of
// complete calls (then the block stays content).
using BlockParser = std::function<bool(string_view body, std::vector<Call>& out)>;

struct Markers {
  string_view begin, end;
};

// Appends `text` to the builder: every complete block (one of `kinds`, its
// begin marker through its end marker) whose body parses becomes calls; the
// text around them, and blocks that are incomplete or do not parse, stay content.
void scan_blocks(string_view text, std::initializer_list<Markers> kinds, const BlockParser& parse, Builder& b) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t start = npos;
    Markers kind{};
    for (const Markers& k : kinds) {
      size_t s = text.find(k.begin, pos);
      if (s < start) {
        start = s;
        kind = k;
      }
    }
    if (start == npos) break;
    size_t end = text.find(kind.end, start + kind.begin.size());
    if (end == npos) break;  // incomplete: the rest stays content
    // A begin marker with no end of its own before this one (a block cut
    // short, or the marker named in prose) stays content: the block is the
    // last begin before the end.
    start = text.rfind(kind.begin, end - kind.begin.size());
    size_t body = start + kind.begin.size();
    size_t after = end + kind.end.size();
    std::vector<Call> found;
    if (parse(text.substr(body, end - body), found) && !found.empty()) {
      b.content += text.substr(pos, start - pos);
      b.add_calls(std::move(found));
    } else {
      b.content += text.substr(pos, after - pos);
    }
    pos = after;
  }
  if (pos < text.size()) b.content += text.substr(pos);
}

// A list of `begin`...`end` items separated by whitespace, each parsed by
// `item`; false on anything else or an item that does not parse.
bool parse_items(string_view body, string_view begin, string_view end,
                 const std::function<bool(string_view item)>& item) {
  size_t pos = 0;
  bool any = false;
  for (;;) {
    while (pos < body.size() && is_space(body[pos])) ++pos;
    if (pos == body.size()) return any;
    if (!starts_with(body.substr(pos), begin)) return false;
    pos += begin.size();
    size_t e = body.find(end, pos);
    if (e == npos || !item(body.substr(pos, e - pos))) return false;
    pos = e + end.size();
    any = true;
  }
}

// `key="value"` pairs up to `close` (">" or "<|sep|>"); `s` is advanced past
// `close`. Values are unescaped for &quot; and &amp; (Kimi K3 escapes them).
bool parse_attributes(string_view& s, string_view close, std::map<std::string, std::string>& attrs) {
  for (;;) {
    s = ltrim(s);
    if (starts_with(s, close)) {
      s.remove_prefix(close.size());
      return true;
    }
    size_t eq = s.find('=');
    if (eq == npos || eq == 0 || eq + 1 >= s.size() || s[eq + 1] != '"') return false;
    std::string key(trim(s.substr(0, eq)));
    if (key.empty() || key.find_first_of(" \n\t<>\"") != std::string::npos) return false;
    size_t q = s.find('"', eq + 2);
    if (q == npos) return false;
    string_view raw = s.substr(eq + 2, q - eq - 2);
    std::string value;
    for (size_t i = 0; i < raw.size(); ++i) {
      if (starts_with(raw.substr(i), "&quot;")) {
        value += '"';
        i += 5;
      } else if (starts_with(raw.substr(i), "&amp;")) {
        value += '&';
        i += 4;
      } else {
        value += raw[i];
      }
    }
    attrs[key] = std::move(value);
    s.remove_prefix(q + 1);
  }
}

bool valid_name(string_view name) { return !name.empty() && name.find_first_of(" \n\r\t<>\"") == npos; }

// ---- <think>...</think> -----------------------------------------------------

// Takes the reasoning off the front of `text` and returns the rest. The
// generation prompt may have opened the block, so a closing marker with no
// opening one ends reasoning begun at the start; an opening marker with no
// closing one (cut off while thinking) makes all the rest reasoning.
// `open`/`close`: the family's markers (MiniMax-M3: <mm:think>).
string_view take_think(string_view text, Builder& b, string_view open = "<think>", string_view close = "</think>") {
  string_view s = ltrim(text);
  bool opened = starts_with(s, open);
  if (opened) s.remove_prefix(open.size());
  size_t end = s.find(close);
  if (end == npos) {
    if (!opened) return text;
    b.add_reasoning(s);
    return {};
  }
  b.add_reasoning(s.substr(0, end));
  return s.substr(end + close.size());
}

// ---- Kimi K2 ----------------------------------------------------------------

bool kimi_k2_block(string_view body, std::vector<Call>& out) {
  return parse_items(body, "<|tool_call_begin|>", "<|tool_call_end|>", [&](string_view item) {
    constexpr string_view arguments = "<|tool_call_argument_begin|>";
    size_t sep = item.find(arguments);
    if (sep == npos) return false;
    string_view id = trim(item.substr(0, sep));
    string_view name = id;
    consume(name, "functions.");
    size_t colon = name.rfind(':');
    if (colon != npos && colon + 1 < name.size() && name.substr(colon + 1).find_first_not_of("0123456789") == npos)
      name = name.substr(0, colon);
    std::optional<std::string> args = normalize_arguments(item.substr(sep + arguments.size()));
    if (!valid_name(name) || !args) return false;
    out.push_back({std::string(id), std::string(name), *std::move(args)});
    return true;
  });
}

void parse_kimi_k2(string_view text, Builder& b) {
  scan_blocks(take_think(text, b),
              {{"<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"},
               {"<|tool_call_section_begin|>", "<|tool_call_section_end|>"}},
              kimi_k2_block, b);
}

// ---- DeepSeek V3 / V3.1 -----------------------------------------------------

bool deepseek_v3_block(string_view body, std::vector<Call>& out) {
  return parse_items(body, "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", [&](string_view item) {
    constexpr string_view sep = "<｜tool▁sep｜>";
    size_t s = item.find(sep);
    if (s == npos) return false;
    string_view name = trim(item.substr(0, s));
    string_view args = item.substr(s + sep.size());
    if (name == "function") {  // V3 / R1: function<｜tool▁sep｜>NAME\n```json\n{...}\n```
      size_t nl = args.find('\n');
      if (nl == npos) return false;
      name = trim(args.substr(0, nl));
      args = trim(args.substr(nl + 1));
      if (!consume(args, "```json")) consume(args, "```");
      args = rtrim(args);
      consume_suffix(args, "```");
    }
    std::optional<std::string> a = normalize_arguments(args);
    if (!valid_name(name) || !a) return false;
    out.push_back({{}, std::string(name), *std::move(a)});
    return true;
  });
}

void parse_deepseek_v3(string_view text, Builder& b) {
  scan_blocks(take_think(text, b), {{"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"}}, deepseek_v3_block, b);
}

// ---- XML-ish invoke/parameter (DeepSeek DSML, MiniMax-M2) ------------------

// <P invoke name="N">  <P parameter name="K" [string="true"]>V</P parameter> ...  </P invoke>
struct InvokeTags {
  string_view invoke_open, invoke_close, param_open, param_close;
};

bool invoke_block(string_view body, const InvokeTags& tags, std::vector<Call>& out) {
  return parse_items(body, tags.invoke_open, tags.invoke_close, [&](string_view item) {
    std::map<std::string, std::string> attrs;
    if (!parse_attributes(item, ">", attrs)) return false;
    auto name = attrs.find("name");
    if (name == attrs.end() || !valid_name(name->second)) return false;
    ojson args = ojson::object();
    if (!trim(item).empty()) {
      bool ok = parse_items(item, tags.param_open, tags.param_close, [&](string_view param) {
        std::map<std::string, std::string> pattrs;
        if (!parse_attributes(param, ">", pattrs)) return false;
        auto key = pattrs.find("name");
        if (key == pattrs.end() || key->second.empty()) return false;
        auto is_string = pattrs.find("string");
        args[key->second] =
            is_string != pattrs.end() && is_string->second == "true" ? ojson(std::string(param)) : xml_value(param);
        return true;
      });
      if (!ok) return false;
    }
    out.push_back({{}, name->second, dump(args)});
    return true;
  });
}

void parse_deepseek_dsml(string_view text, Builder& b) {
  static constexpr InvokeTags tags{"<｜DSML｜invoke", "</｜DSML｜invoke>", "<｜DSML｜parameter",
                                   "</｜DSML｜parameter>"};
  scan_blocks(
      take_think(text, b),
      {{"<｜DSML｜function_calls>", "</｜DSML｜function_calls>"}, {"<｜DSML｜tool_calls>", "</｜DSML｜tool_calls>"}},
      [](string_view body, std::vector<Call>& out) { return invoke_block(body, tags, out); }, b);
}

void parse_minimax_m2(string_view text, Builder& b) {
  static constexpr InvokeTags tags{"<invoke", "</invoke>", "<parameter", "</parameter>"};
  scan_blocks(
      take_think(text, b), {{"<minimax:tool_call>", "</minimax:tool_call>"}},
      [](string_view body, std::vector<Call>& out) { return invoke_block(body, tags, out); }, b);
}

// ---- MiniMax-M3: MiniMax-M2's invoke, every tag behind the namespace token -----
//   NS<tool_call>\nNS<invoke name="N">NS<K>V NS</K>...NS</invoke>\n...NS</tool_call>
// (NS = ]<]minimax[>[, no space before it) where V is a scalar (JSON when it
// parses, else the text) or nested elements: NS<item>...NS</item>... a list,
// NS<key>...NS</key>... an object (the template's to_xml); reasoning in
// <mm:think>...</mm:think>.
constexpr string_view kMiniMaxNs = "]<]minimax[>[";

// Elements NS<K>...NS</K> one after another (whitespace between them) into
// (key, raw value) pairs, a same-named element nested inside counted; false
// when `s` is not such a list.
bool minimax_m3_elements(string_view s, std::vector<std::pair<std::string, string_view>>& out) {
  for (s = ltrim(s); !s.empty(); s = ltrim(s)) {
    if (!consume(s, kMiniMaxNs) || !consume(s, "<")) return false;
    size_t gt = s.find('>');
    if (gt == npos || gt == 0 || s[0] == '/') return false;
    const std::string key(s.substr(0, gt));
    if (key.find_first_of(" \n\t<\"") != npos) return false;
    s.remove_prefix(gt + 1);
    const std::string open = std::string(kMiniMaxNs) + "<" + key + ">";
    const std::string close = std::string(kMiniMaxNs) + "</" + key + ">";
    size_t depth = 1, p = 0;
    for (;;) {
      size_t c = s.find(close, p), o = s.find(open, p);
      if (c == npos) return false;
      if (o < c) {
        ++depth;
        p = o + open.size();
      } else if (--depth > 0) {
        p = c + close.size();
      } else {
        out.emplace_back(key, s.substr(0, c));
        s.remove_prefix(c + close.size());
        break;
      }
    }
  }
  return true;
}

std::optional<ojson> minimax_m3_value(string_view v, int depth) {
  if (!starts_with(ltrim(v), kMiniMaxNs)) return xml_value(v);
  std::vector<std::pair<std::string, string_view>> items;
  if (depth > 64 || !minimax_m3_elements(v, items)) return std::nullopt;
  const bool list = std::all_of(items.begin(), items.end(), [](const auto& i) { return i.first == "item"; });
  ojson out = list ? ojson::array() : ojson::object();
  for (const auto& [key, raw] : items) {
    std::optional<ojson> x = minimax_m3_value(raw, depth + 1);
    if (!x) return std::nullopt;
    if (list)
      out.push_back(*std::move(x));
    else
      out[key] = *std::move(x);
  }
  return out;
}

bool minimax_m3_block(string_view body, std::vector<Call>& out) {
  const std::string invoke_open = std::string(kMiniMaxNs) + "<invoke",
                    invoke_close = std::string(kMiniMaxNs) + "</invoke>";
  return parse_items(body, invoke_open, invoke_close, [&](string_view item) {
    std::map<std::string, std::string> attrs;
    if (!parse_attributes(item, ">", attrs)) return false;
    auto name = attrs.find("name");
    if (name == attrs.end() || !valid_name(name->second)) return false;
    std::vector<std::pair<std::string, string_view>> params;
    if (!minimax_m3_elements(item, params)) return false;
    ojson args = ojson::object();
    for (const auto& [key, raw] : params) {
      std::optional<ojson> v = minimax_m3_value(raw, 0);
      if (!v) return false;
      args[key] = *std::move(v);
    }
    out.push_back({{}, name->second, dump(args)});
    return true;
  });
}

void parse_minimax_m3(string_view text, Builder& b) {
  const std::string open = std::string(kMiniMaxNs) + "<tool_call>", close = std::string(kMiniMaxNs) + "</tool_call>";
  scan_blocks(take_think(text, b, "<mm:think>", "</mm:think>"), {{open, close}}, minimax_m3_block, b);
}

// ---- Hermes JSON (Qwen3, Qwen2.5) ------------------------------------------

bool hermes_block(string_view body, std::vector<Call>& out) {
  std::optional<ojson> j = parse_json(trim(body));
  if (!j || !j->is_object()) return false;
  auto name = j->find("name");
  if (name == j->end() || !name->is_string() || !valid_name(name->get_ref<const std::string&>())) return false;
  auto args = j->find("arguments");
  if (args == j->end()) args = j->find("parameters");
  std::optional<std::string> a = std::string("{}");
  if (args != j->end())
    a = args->is_string() ? normalize_arguments(args->get_ref<const std::string&>()) : normalize_arguments(dump(*args));
  if (!a) return false;
  out.push_back({{}, name->get<std::string>(), *std::move(a)});
  return true;
}

void parse_hermes(string_view text, Builder& b) {
  scan_blocks(take_think(text, b), {{"<tool_call>", "</tool_call>"}}, hermes_block, b);
}

// ---- Qwen3.5 / Qwen3-Coder XML ----------------------------------------------

// The template writes scalar values with Python's str(): True, False, None.
ojson qwen_value(string_view raw) {
  if (starts_with(raw, "\n")) raw.remove_prefix(1);
  if (ends_with(raw, "\n")) raw.remove_suffix(1);
  string_view t = trim(raw);
  if (t == "True") return true;
  if (t == "False") return false;
  if (t == "None") return nullptr;
  return xml_value(raw);
}

bool qwen35_block(string_view body, std::vector<Call>& out) {
  return parse_items(body, "<function=", "</function>", [&](string_view item) {
    size_t gt = item.find('>');
    if (gt == npos) return false;
    string_view name = trim(item.substr(0, gt));
    if (!valid_name(name)) return false;
    ojson args = ojson::object();
    string_view params = item.substr(gt + 1);
    if (!trim(params).empty()) {
      bool ok = parse_items(params, "<parameter=", "</parameter>", [&](string_view param) {
        size_t pgt = param.find('>');
        if (pgt == npos) return false;
        std::string key(trim(param.substr(0, pgt)));
        if (key.empty()) return false;
        args[key] = qwen_value(param.substr(pgt + 1));
        return true;
      });
      if (!ok) return false;
    }
    out.push_back({{}, std::string(name), dump(args)});
    return true;
  });
}

void parse_qwen35(string_view text, Builder& b) {
  scan_blocks(take_think(text, b), {{"<tool_call>", "</tool_call>"}}, qwen35_block, b);
}

// ---- GLM-4.5 / 4.6 ----------------------------------------------------------

bool glm45_block(string_view body, std::vector<Call>& out) {
  constexpr string_view key_open = "<arg_key>", key_close = "</arg_key>";
  constexpr string_view value_open = "<arg_value>", value_close = "</arg_value>";
  size_t first = body.find(key_open);
  string_view name = trim(body.substr(0, first));
  if (!valid_name(name)) return false;
  ojson args = ojson::object();
  string_view rest = first == npos ? string_view() : body.substr(first);
  for (rest = ltrim(rest); !rest.empty(); rest = ltrim(rest)) {
    if (!consume(rest, key_open)) return false;
    size_t ke = rest.find(key_close);
    if (ke == npos) return false;
    std::string key(trim(rest.substr(0, ke)));
    rest = ltrim(rest.substr(ke + key_close.size()));
    if (key.empty() || !consume(rest, value_open)) return false;
    size_t ve = rest.find(value_close);
    if (ve == npos) return false;
    args[key] = xml_value(rest.substr(0, ve));
    rest = rest.substr(ve + value_close.size());
  }
  out.push_back({{}, std::string(name), dump(args)});
  return true;
}

void parse_glm45(string_view text, Builder& b) {
  scan_blocks(take_think(text, b), {{"<tool_call>", "</tool_call>"}}, glm45_block, b);
}

// ---- Kimi K3 ----------------------------------------------------------------

// A call's body after `<|open|>call`: tool="N" index="i"<|sep|> then
// <|open|>argument key="K" type="T"<|sep|>V<|close|>argument<|sep|> items or
// one <|open|>json type="object"<|sep|>{...}<|close|>json<|sep|>.
bool kimi_k3_call(string_view item, std::vector<Call>& out) {
  std::map<std::string, std::string> attrs;
  if (!parse_attributes(item, "<|sep|>", attrs)) return false;
  auto name = attrs.find("tool");
  if (name == attrs.end() || !valid_name(name->second)) return false;
  ojson args = ojson::object();
  size_t pos = 0;
  for (;;) {
    while (pos < item.size() && is_space(item[pos])) ++pos;
    if (pos == item.size()) break;
    string_view rest = item.substr(pos);
    bool is_json = consume(rest, "<|open|>json");
    if (!is_json && !consume(rest, "<|open|>argument")) return false;
    string_view close = is_json ? "<|close|>json<|sep|>" : "<|close|>argument<|sep|>";
    std::map<std::string, std::string> a;
    if (!parse_attributes(rest, "<|sep|>", a)) return false;
    size_t e = rest.find(close);
    if (e == npos) return false;
    string_view value = rest.substr(0, e);
    if (is_json) {
      std::optional<ojson> j = parse_json(value);
      if (!j || !j->is_object()) return false;
      for (auto& [k, v] : j->items()) args[k] = v;
    } else {
      auto key = a.find("key");
      if (key == a.end() || key->second.empty()) return false;
      auto type = a.find("type");
      args[key->second] = type != a.end() && type->second == "string" ? ojson(std::string(value)) : xml_value(value);
    }
    pos = static_cast<size_t>(rest.data() - item.data()) + e + close.size();
  }
  out.push_back({{}, name->second, dump(args)});
  return true;
}

void parse_kimi_k3(string_view text, Builder& b) {
  constexpr string_view think_open = "<|open|>think<|sep|>", think_close = "<|close|>think<|sep|>";
  constexpr string_view response_open = "<|open|>response<|sep|>", response_close = "<|close|>response<|sep|>";
  // The turn's own end, when the caller left it on.
  string_view t = text;
  string_view end = rtrim(t);
  if (consume_suffix(end, "<|end_of_msg|>")) t = end = rtrim(end);
  if (consume_suffix(end, "<|close|>message<|sep|>")) t = end;
  // Reasoning: the generation prompt opens the think block when thinking is on.
  size_t tc = t.find(think_close);
  if (tc != npos) {
    string_view r = ltrim(t.substr(0, tc));
    if (starts_with(r, think_open)) r.remove_prefix(think_open.size());
    b.add_reasoning(r);
    t = t.substr(tc + think_close.size());
  } else if (starts_with(ltrim(t), think_open)) {
    b.add_reasoning(ltrim(t).substr(think_open.size()));
    t = {};
  }
  // The response block (opened by the generation prompt when thinking is off).
  string_view s = ltrim(t);
  if (starts_with(s, response_open)) {
    b.extracted = true;
    t = s.substr(response_open.size());
  }
  size_t rc = t.find(response_close);
  if (rc != npos) {
    b.extracted = true;
    b.content += t.substr(0, rc);
    t = t.substr(rc + response_close.size());
  }
  scan_blocks(
      t, {{"<|open|>tools<|sep|>", "<|close|>tools<|sep|>"}},
      [](string_view body, std::vector<Call>& out) {
    return parse_items(body, "<|open|>call", "<|close|>call<|sep|>",
                       [&](string_view item) { return kimi_k3_call(item, out); });
      },
      b);
}

// ---- harmony (gpt-oss) ------------------------------------------------------

// The value of `key` in a harmony header ("to=functions.f", "<|channel|>analysis"):
// up to whitespace or the next marker.
string_view header_field(string_view header, string_view key) {
  size_t k = header.find(key);
  if (k == npos) return {};
  string_view v = header.substr(k + key.size());
  size_t e = 0;
  while (e < v.size() && !is_space(v[e]) && v[e] != '<') ++e;
  return v.substr(0, e);
}

void parse_harmony(string_view text, Builder& b) {
  constexpr string_view start = "<|start|>", message = "<|message|>";
  if (text.find(message) == npos) {  // no harmony message at all: plain text
    b.content += text;
    return;
  }
  b.extracted = true;
  size_t pos = 0;
  while (pos < text.size()) {
    // A message: [<|start|>ROLE] [to=RECIPIENT] <|channel|>CHANNEL [json] <|message|>BODY <|end|>|<|call|>|<|return|>.
    // The generation prompt ends with <|start|>assistant, so the first one starts at its header.
    const size_t raw = pos;
    if (starts_with(text.substr(pos), start)) pos += start.size();
    size_t m = text.find(message, pos);
    size_t next = text.find(start, pos);
    if (m == npos || next < m) {  // a header with no body (cut off), or text outside any message
      size_t e = next == npos ? text.size() : next;
      b.content += text.substr(raw, e - raw);
      pos = e;
      continue;
    }
    string_view header = text.substr(pos, m - pos);
    size_t body = m + message.size();
    size_t end = text.size();
    size_t after = end;  // stays at the end when the message has no terminator
    for (string_view t : {string_view("<|end|>"), string_view("<|call|>"), string_view("<|return|>"), start}) {
      size_t e = text.find(t, body);
      if (e < end) {
        end = e;
        after = t == start ? e : e + t.size();
      }
    }
    string_view content = text.substr(body, end - body);
    string_view recipient = header_field(header, "to=");
    string_view channel = header_field(header, "<|channel|>");
    if (!recipient.empty()) {
      // <|call|> is gpt-oss's stop token, so a call may run to the end of the
      // text; empty arguments there are a cut-off call, not an empty object.
      const bool terminated = end < text.size();
      std::optional<std::string> args;
      if (terminated || !trim(content).empty()) args = normalize_arguments(content);
      string_view name = recipient;
      bool function = consume(name, "functions.");
      if (function && valid_name(name) && args) {
        b.add_calls({{{}, std::string(name), *std::move(args)}});
      } else {  // a call that does not parse, or to a built-in tool (browser, python): kept verbatim
        b.content += text.substr(raw, after - raw);
      }
    } else if (channel == "analysis") {
      b.add_reasoning(content);
    } else {  // final, or commentary meant for the user (a preamble)
      b.content += content;
    }
    pos = after;
  }
}

}  // namespace

std::string_view tool_call_format_name(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::kimi_k2: return "kimi-k2";
    case ToolCallFormat::kimi_k3: return "kimi-k3";
    case ToolCallFormat::deepseek_v3: return "deepseek-v3";
    case ToolCallFormat::deepseek_dsml: return "deepseek-dsml";
    case ToolCallFormat::hermes_json: return "hermes-json";
    case ToolCallFormat::qwen35_xml: return "qwen3.5-xml";
    case ToolCallFormat::glm45: return "glm-4.5";
    case ToolCallFormat::harmony: return "harmony";
    case ToolCallFormat::minimax_m2: return "minimax-m2";
    case ToolCallFormat::minimax_m3: return "minimax-m3";
  }
  return "unknown";
}

std::optional<ToolCallFormat> tool_call_format(const std::string& t) {
  // Most specific markers first: several families write <tool_call>.
  if (contains(t, "<|tool_calls_section_begin|>") || contains(t, "<|tool_call_section_begin|>"))
    return ToolCallFormat::kimi_k2;
  if (contains(t, "<|open|>") && contains(t, "<|sep|>") && contains(t, "tool_calls")) return ToolCallFormat::kimi_k3;
  if (contains(t, "｜DSML｜")) return ToolCallFormat::deepseek_dsml;
  if (contains(t, "<｜tool▁calls▁begin｜>")) return ToolCallFormat::deepseek_v3;
  if (contains(t, "<minimax:tool_call>")) return ToolCallFormat::minimax_m2;
  // MiniMax-M3's template spells its namespace token once and joins it to the tags.
  if (contains(t, kMiniMaxNs) && contains(t, "<tool_call>")) return ToolCallFormat::minimax_m3;
  if (contains(t, "<|channel|>") && contains(t, "<|call|>") && contains(t, "to=")) return ToolCallFormat::harmony;
  if (contains(t, "<tool_call>")) {
    if (contains(t, "<arg_key>")) return ToolCallFormat::glm45;
    if (contains(t, "<function=") && contains(t, "<parameter=")) return ToolCallFormat::qwen35_xml;
    // Apriel writes a JSON list in <tool_calls>...</tool_calls>, and names <tool_call> only in its prose.
    if (contains(t, "tool_calls") && !contains(t, "<tool_calls>")) return ToolCallFormat::hermes_json;
  }
  return std::nullopt;
}

ParsedReply parse_reply(ToolCallFormat f, const std::string& generated_text) {
  Builder b;
  try {
    switch (f) {
      case ToolCallFormat::kimi_k2: parse_kimi_k2(generated_text, b); break;
      case ToolCallFormat::kimi_k3: parse_kimi_k3(generated_text, b); break;
      case ToolCallFormat::deepseek_v3: parse_deepseek_v3(generated_text, b); break;
      case ToolCallFormat::deepseek_dsml: parse_deepseek_dsml(generated_text, b); break;
      case ToolCallFormat::hermes_json: parse_hermes(generated_text, b); break;
      case ToolCallFormat::qwen35_xml: parse_qwen35(generated_text, b); break;
      case ToolCallFormat::glm45: parse_glm45(generated_text, b); break;
      case ToolCallFormat::harmony: parse_harmony(generated_text, b); break;
      case ToolCallFormat::minimax_m2: parse_minimax_m2(generated_text, b); break;
      case ToolCallFormat::minimax_m3: parse_minimax_m3(generated_text, b); break;
    }
  } catch (...) {
    // Only allocation can fail above; the reply is then all content.
    ParsedReply r;
    r.content = generated_text;
    return r;
  }
  return std::move(b).finish();
}

}  // namespace ns::chat
