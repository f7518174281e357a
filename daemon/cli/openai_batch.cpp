// OpenAI Batch JSONL: input lines -> BatchRequest, finished jobs -> output lines.
// Strict where leniency would change results: a batch runs unattended, so a
// field we cannot honour is reported at submit time rather than ignored.
#include "daemon/cli/openai_batch.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <limits>
#include <string>
#include <unordered_map>
#include <utility>

#include "engine/chat/chat_messages_json.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/json_schema.h"
#include "common/error.h"
#include "common/utf8.h"

namespace ns::cli {
namespace {

using nlohmann::json;
using ordered_json = nlohmann::ordered_json;

[[noreturn]] void fail(const std::string& message) { throw Error(ErrorKind::invalid_input, message); }

// "an object", "a string", ...
std::string a_type(const json& v) {
  if (v.is_null()) return "null";
  const std::string name = v.type_name();
  return (name[0] == 'a' || name[0] == 'o' ? "an " : "a ") + name;
}

// A JSON value for an error message: compact, at most ~40 bytes.
std::string shown(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

int64_t read_integer(const json& v, const std::string& path) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail(path + " = " + shown(v) + " is out of range");
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  fail(path + " must be an integer, not " + (v.is_number() ? shown(v) : a_type(v)));
}

int32_t read_int32(const json& v, const std::string& path) {
  const int64_t i = read_integer(v, path);
  if (i < std::numeric_limits<int32_t>::min() || i > std::numeric_limits<int32_t>::max())
    fail(path + " = " + shown(v) + " is out of range (it must fit in 32 bits)");
  return static_cast<int32_t>(i);
}

float read_number(const json& v, const std::string& path) {
  if (!v.is_number()) fail(path + " must be a number, not " + a_type(v));
  return static_cast<float>(v.get<double>());  // out-of-range values become inf, which validate() rejects
}

bool read_bool(const json& v, const std::string& path) {
  if (!v.is_boolean()) fail(path + " must be true or false, not " + a_type(v));
  return v.get<bool>();
}

std::string read_string(const json& v, const std::string& path) {
  if (!v.is_string()) fail(path + " must be a string, not " + a_type(v));
  return v.get<std::string>();
}

std::vector<std::string> read_stop(const json& v) {
  if (v.is_string()) return {v.get<std::string>()};
  if (!v.is_array()) fail("body.stop must be a string or an array of strings, not " + a_type(v));
  std::vector<std::string> stop;
  for (size_t i = 0; i < v.size(); ++i) stop.push_back(read_string(v[i], "body.stop[" + std::to_string(i) + "]"));
  return stop;
}

// Sets one sampling field; false if `key` is not one.
bool apply_sampling_field(const std::string& key, const json& v, SamplingParams& p) {
  const std::string path = "body." + key;
  if (key == "max_tokens" || key == "max_completion_tokens")
    p.max_tokens = read_int32(v, path);
  else if (key == "temperature")
    p.temperature = read_number(v, path);
  else if (key == "top_p")
    p.top_p = read_number(v, path);
  else if (key == "seed") {
    // Any 64-bit unsigned value: the sampler's seed is a uint64.
    // (nlohmann stores every non-negative integer as unsigned.)
    if (v.is_number_unsigned())
      p.seed = v.get<uint64_t>();
    else if (v.is_number_integer())
      fail(path + " = " + shown(v) + " is invalid: must be a non-negative integer");
    else
      fail(path + " must be an integer, not " + (v.is_number() ? shown(v) : a_type(v)));
  } else if (key == "stop")
    p.stop = read_stop(v);
  // Extensions with llama.cpp server's names, for samplers OpenAI does not have.
  else if (key == "top_k")
    p.top_k = read_int32(v, path);
  else if (key == "min_p")
    p.min_p = read_number(v, path);
  else if (key == "repeat_penalty")
    p.repeat_penalty = read_number(v, path);
  else if (key == "repeat_last_n")
    p.repeat_last_n = read_int32(v, path);
  else if (key == "ignore_eos")
    p.ignore_eos = read_bool(v, path);
  else
    return false;
  return true;
}

// n, logprobs, top_logprobs; false if `key` is not one of them.
bool apply_output_field(const std::string& key, const json& v, bool chat, SamplingParams& p) {
  const std::string path = "body." + key;
  if (key == "n") {
    p.n = read_int32(v, path);
  } else if (key == "top_logprobs") {
    p.top_logprobs = read_int32(v, path);
  } else if (key == "logprobs") {
    if (v.is_boolean()) {
      p.logprobs = v.get<bool>();
    } else if (!chat && v.is_number()) {  // the legacy completions API: logprobs = k alternatives
      p.logprobs = true;
      p.top_logprobs = read_int32(v, path);
    } else {
      fail(path +
           (chat ? " must be true or false, not " : " must be an integer (alternatives per token) or a boolean, not ") +
           (v.is_number() ? shown(v) : a_type(v)));
    }
  } else {
    return false;
  }
  return true;
}

// OpenAI fields that nightshift can honour only at their neutral value.
struct NeutralOnly {
  const char* key;
  bool (*is_neutral)(const json& v);
  const char* why;
};

bool is_one(const json& v) { return v.is_number_integer() && v.get<int64_t>() == 1; }
bool is_false_or_zero(const json& v) {
  return (v.is_boolean() && !v.get<bool>()) || (v.is_number() && v.get<double>() == 0.0);
}
bool is_zero(const json& v) { return v.is_number() && v.get<double>() == 0.0; }
bool is_empty_container(const json& v) { return (v.is_object() || v.is_array()) && v.empty(); }
bool is_empty_string(const json& v) { return v.is_string() && v.get<std::string>().empty(); }
bool is_none(const json& v) { return v.is_string() && v.get<std::string>() == "none"; }
bool never(const json&) { return false; }

constexpr NeutralOnly kNeutralOnly[] = {
    {"stream", is_false_or_zero, "batch requests do not stream"},
    {"stream_options", never, "batch requests do not stream"},
    {"presence_penalty", is_zero, "use repeat_penalty (a llama.cpp-style extension) instead"},
    {"frequency_penalty", is_zero, "use repeat_penalty (a llama.cpp-style extension) instead"},
    {"echo", is_false_or_zero, "the prompt is not repeated in the output"},
    {"best_of", is_one, "nightshift writes one completion per request"},
    {"logit_bias", is_empty_container, "nightshift's sampler has no logit bias"},
    {"suffix", is_empty_string, "nightshift does not insert text between a prompt and a suffix"},
    {"functions", is_empty_container, "OpenAI's old form: give tools instead"},
    {"function_call", is_none, "OpenAI's old form: give tool_choice instead"},
};

// Fields that do not change the generated text: accepted and not stored.
bool is_ignored_field(const std::string& key) {
  return key == "user" || key == "metadata" || key == "store" || key == "service_tier" || key == "parallel_tool_calls";
}

void check_other_field(const std::string& key, const json& v) {
  if (is_ignored_field(key)) return;
  for (const NeutralOnly& n : kNeutralOnly) {
    if (key != n.key) continue;
    if (n.is_neutral(v)) return;
    fail("body." + key + " = " + shown(v) + " is not supported: " + n.why);
  }
  fail("body." + key + " is not a field nightshift knows (docs/batch-jsonl.md lists the supported ones)");
}

BatchEndpoint read_endpoint(const json& line) {
  const auto url = line.find("url");
  if (url == line.end()) fail("the line has no \"url\": use \"/v1/completions\" or \"/v1/chat/completions\"");
  const std::string u = read_string(*url, "url");
  if (u == "/v1/completions") return BatchEndpoint::completions;
  if (u == "/v1/chat/completions") return BatchEndpoint::chat_completions;
  fail("url is \"" + u.substr(0, 60) + "\": nightshift serves /v1/completions and /v1/chat/completions");
}

void read_input(const json& body, BatchRequest& r) {
  const bool chat = r.is_chat();
  const char* wanted = chat ? "messages" : "prompt";
  const char* other = chat ? "prompt" : "messages";
  const auto misplaced = body.find(other);
  if (misplaced != body.end() && !misplaced->is_null())
    fail(std::string("body.") + other + " does not belong to " + endpoint_url(r.endpoint) + ", which takes body." +
         wanted);
  const auto it = body.find(wanted);
  if (it == body.end() || it->is_null()) fail(std::string("body has no \"") + wanted + "\"");
  if (chat) {
    r.messages = chat::parse_chat_messages(*it, "body.messages");
    return;
  }
  if (it->is_array())
    fail("body.prompt is an array: put one prompt per line (arrays of prompts or token ids are not supported)");
  r.prompt = read_string(*it, "body.prompt");
  if (r.prompt.empty()) fail("body.prompt is empty");
}

// body.response_format, read from the body with its key order kept (a schema's
// `properties` order is the order the output is generated in).
std::string response_format_grammar(const ordered_json& rf) {
  const std::string at = "body.response_format";
  if (!rf.is_object()) fail(at + " must be an object like {\"type\": \"json_schema\", ...}, not " + a_type(json(rf)));
  const auto type = rf.find("type");
  if (type == rf.end() || !type->is_string()) fail(at + ".type must be \"text\", \"json_object\" or \"json_schema\"");
  const std::string t = type->get<std::string>();
  for (const auto& [key, v] : rf.items())
    if (key != "type" && !(t == "json_schema" && key == "json_schema"))
      fail(at + "." + key + " is not a field of a \"" + t + "\" response_format");
  if (t == "text") return "";
  if (t == "json_object") return grammar::json_object_gbnf();
  if (t != "json_schema")
    fail(at + ".type = " + shown(json(*type)) + ": use \"text\", \"json_object\" or \"json_schema\"");
  const auto js = rf.find("json_schema");
  if (js == rf.end() || !js->is_object())
    fail(at + ".json_schema must be an object {\"name\", \"schema\", \"strict\"}");
  for (const auto& [key, v] : js->items()) {
    if (key == "name" || key == "description") continue;
    if (key == "strict") {
      // Constrained decoding is always strict; false asks for less, which strict output also satisfies.
      if (!v.is_boolean()) fail(at + ".json_schema.strict must be true or false");
      continue;
    }
    if (key != "schema")
      fail(at + ".json_schema." + key + " is not a field nightshift knows (name, description, schema, strict)");
  }
  const auto schema = js->find("schema");
  if (schema == js->end()) fail(at + ".json_schema has no \"schema\"");
  try {
    return grammar::json_schema_to_gbnf_cached(schema->dump());
  } catch (const Error& e) {
    std::string what =
        e.what();  // "$.properties.x: ..." -> "body.response_format.json_schema.schema.properties.x: ..."
    if (what.starts_with("$")) what = what.substr(1);
    fail(at + ".json_schema.schema" + what);
  }
}

std::string checked_grammar(const json& v) {
  const std::string text = read_string(v, "body.grammar");
  static thread_local uint64_t last_valid = 0;  // a batch usually repeats one grammar: check it once
  const uint64_t h = grammar::text_hash(text);
  if (h == last_valid && h != 0) return text;
  try {
    grammar::parse_gbnf(text);
  } catch (const Error& e) {
    fail(std::string("body.grammar: ") + e.what());
  }
  last_valid = h;
  return text;
}

// body.tool_choice: "auto" (the default) offers the tools; "none" renders the conversation without them, so
// the model answers in text. Forcing a call ("required", a named function) would need the output constrained
// to the family's call markup: refused.
bool offers_tools(const json& body, bool chat) {
  const auto tc = body.find("tool_choice");
  if (tc == body.end() || tc->is_null()) return true;
  if (!chat && !is_none(*tc))
    fail("body.tool_choice = " + shown(*tc) + " is not supported by /v1/completions: tools are a chat feature");
  if (tc->is_string() && (*tc == "auto" || *tc == "none")) return *tc == "auto";
  fail("body.tool_choice = " + shown(*tc) +
       " is not supported: give \"auto\" or \"none\" (nightshift does not "
       "force a tool call)");
}

void read_body(const json& body, BatchRequest& r, const ordered_json* ordered_body) {
  const auto model = body.find("model");
  if (model != body.end() && !model->is_null()) {
    r.model = read_string(*model, "body.model");
    if (r.model.empty()) fail("body.model is empty: name a model, or leave it out to use the one given to submit");
  }
  read_input(body, r);
  const auto max_tokens = body.find("max_tokens");
  const auto max_completion = body.find("max_completion_tokens");
  if (max_tokens != body.end() && max_completion != body.end() && !max_tokens->is_null() && !max_completion->is_null())
    fail("body has both max_tokens and max_completion_tokens: give one");
  for (const auto& [key, v] : body.items()) {
    if (key == "model" || key == "prompt" || key == "messages" || key == "tool_choice") continue;
    if (v.is_null()) continue;  // null means "the default", as in OpenAI's API
    if (key == "tools") {
      if (is_empty_container(v)) continue;
      if (!r.is_chat())
        fail("body.tools = " + shown(v) +
             " is not supported by /v1/completions: offer tools on "
             "/v1/chat/completions, where the model's chat template renders them");
      // Tool definitions keep their key order (a template prints them with tojson).
      const std::string tools =
          chat::parse_tools(ordered_body ? (*ordered_body)["tools"] : ordered_json::parse(v.dump()), "body.tools");
      if (offers_tools(body, true)) r.tools = tools;
      continue;
    }
    if (apply_sampling_field(key, v, r.sampling)) continue;
    if (key == "grammar") {
      r.sampling.grammar = checked_grammar(v);
      continue;
    }
    if (key == "response_format") {
      if (body.contains("grammar") && !body["grammar"].is_null())
        fail("body has both grammar and response_format: give one");
      r.sampling.grammar = response_format_grammar(ordered_body ? (*ordered_body)["response_format"] : ordered_json(v));
      continue;
    }
    if (apply_output_field(key, v, r.is_chat(), r.sampling)) continue;
    check_other_field(key, v);
  }
  offers_tools(body, r.is_chat());  // tool_choice checked even where no tools came
  const std::string invalid = r.sampling.validate();
  if (!invalid.empty()) fail("body." + invalid);
}

BatchRequest parse_object(const json& line, const SamplingParams& defaults, const ordered_json* ordered_body) {
  if (!line.is_object())
    fail("the line is " + a_type(line) + ": each line must be one JSON object {custom_id, method, url, body}");
  for (const auto& [key, v] : line.items())
    if (key != "custom_id" && key != "method" && key != "url" && key != "body")
      fail("unknown field \"" + key + "\": a line has custom_id, method, url and body");
  BatchRequest r;
  r.sampling = defaults;
  const auto id = line.find("custom_id");
  if (id == line.end()) fail("the line has no \"custom_id\": give each request a unique id");
  r.custom_id = read_string(*id, "custom_id");
  if (r.custom_id.empty()) fail("custom_id is empty: give each request a unique id");
  const auto method = line.find("method");
  if (method == line.end()) fail("the line has no \"method\": use \"POST\"");
  if (read_string(*method, "method") != "POST") fail("method is " + shown(*method) + ": batch requests are \"POST\"");
  r.endpoint = read_endpoint(line);
  const auto body = line.find("body");
  if (body == line.end()) fail("the line has no \"body\"");
  if (!body->is_object()) fail("body is " + a_type(*body) + ", not an object");
  read_body(*body, r, ordered_body);
  return r;
}

json parse_json(std::string_view line) {
  try {
    return json::parse(line);
  } catch (const json::parse_error& e) {
    // nlohmann's message starts with "[json.exception.parse_error.101] ": keep what follows.
    std::string what = e.what();
    const size_t end_of_tag = what.find("] ");
    if (end_of_tag != std::string::npos) what = what.substr(end_of_tag + 2);
    fail("not valid JSON: " + what);
  }
}

// The custom_id of a line that failed, if it can be read, for the report.
std::string custom_id_of(std::string_view line) {
  const json parsed = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object()) {
    const auto id = parsed.find("custom_id");
    if (id != parsed.end() && id->is_string()) return id->get<std::string>();
  }
  return "";
}

bool is_blank(std::string_view s) {
  for (char c : s)
    if (c != ' ' && c != '\t' && c != '\r') return false;
  return true;
}

std::string ids_prefix(BatchEndpoint e) { return e == BatchEndpoint::chat_completions ? "chatcmpl-" : "cmpl-"; }

std::string dump_line(const ordered_json& j) { return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace); }

}  // namespace

const char* endpoint_url(BatchEndpoint e) {
  return e == BatchEndpoint::chat_completions ? "/v1/chat/completions" : "/v1/completions";
}

BatchRequest parse_batch_request(std::string_view line, const SamplingParams& defaults) {
  const json parsed = parse_json(line);
  // A schema's key order matters (properties are generated in it), and a tool's (a template prints it), and
  // `json` sorts keys: the body is read again from an order-keeping parse for them.
  ordered_json body;
  bool ordered = false;
  if ((line.find("response_format") != std::string_view::npos || line.find("\"tools\"") != std::string_view::npos) &&
      parsed.is_object()) {
    const ordered_json whole = ordered_json::parse(line);
    const auto b = whole.find("body");
    if (b != whole.end() && b->is_object()) {
      body = *b;
      ordered = true;
    }
  }
  return parse_object(parsed, defaults, ordered ? &body : nullptr);
}

BatchInput parse_batch_jsonl(std::string_view text, const SamplingParams& defaults) {
  constexpr std::string_view kBom = "\xEF\xBB\xBF";
  if (text.starts_with(kBom)) text.remove_prefix(kBom.size());
  BatchInput input;
  std::unordered_map<std::string, int64_t> first_line_of;  // custom_id -> line that used it
  int64_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (line.ends_with('\r')) line.remove_suffix(1);
    if (is_blank(line)) continue;
    ++input.lines;
    try {
      BatchRequest r = parse_batch_request(line, defaults);
      r.line = line_no;
      const auto [it, inserted] = first_line_of.emplace(r.custom_id, line_no);
      if (!inserted)
        fail("custom_id \"" + r.custom_id + "\" is already used on line " + std::to_string(it->second) +
             ": each request needs its own");
      input.requests.push_back(std::move(r));
    } catch (const Error& e) {
      input.errors.push_back({line_no, custom_id_of(line), e.what()});
    }
  }
  return input;
}

std::string describe(const BatchLineError& error) {
  std::string out = "line " + std::to_string(error.line);
  if (!error.custom_id.empty()) out += " (custom_id \"" + error.custom_id + "\")";
  return out + ": " + error.message;
}

std::vector<std::string> describe_once(const std::vector<BatchLineError>& errors) {
  std::vector<std::pair<std::string, std::vector<const BatchLineError*>>> groups;  // by reason, first seen first
  for (const BatchLineError& e : errors) {
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == e.message; });
    if (it == groups.end()) it = groups.insert(groups.end(), {e.message, {}});
    it->second.push_back(&e);
  }
  std::vector<std::string> out;
  for (const auto& [message, lines] : groups) {
    if (lines.size() == 1) {
      out.push_back(describe(*lines.front()));
      continue;
    }
    // Runs of consecutive line numbers; the first few are enough to find them.
    constexpr size_t kShown = 6;
    std::string ranges;
    size_t runs = 0;
    for (size_t i = 0; i < lines.size();) {
      size_t j = i;
      while (j + 1 < lines.size() && lines[j + 1]->line == lines[j]->line + 1) ++j;
      if (runs++ == kShown) {
        ranges += ", ...";
        break;
      }
      ranges += (ranges.empty() ? "" : ", ") + std::to_string(lines[i]->line) +
                (j > i ? "-" + std::to_string(lines[j]->line) : "");
      i = j + 1;
    }
    out.push_back("lines " + ranges + " (" + std::to_string(lines.size()) + " lines): " + message);
  }
  return out;
}

namespace {

// OpenAI writes a token no longer possible as -9999.0; JSON has no -inf.
double logprob_value(float lp) { return std::isinf(lp) ? -9999.0 : static_cast<double>(lp); }

std::string piece_of(const sampler::TokenPieces& pieces, int32_t id) {
  const auto it = pieces.find(id);
  return it == pieces.end() ? std::string() : it->second;
}

// The text as JSON may hold it: a piece that is part of a UTF-8 character shows as U+FFFD.
std::string token_text(const std::string& piece) { return to_valid_utf8(piece); }

ordered_json bytes_of(const std::string& piece) {
  ordered_json b = ordered_json::array();
  for (const char c : piece) b.push_back(static_cast<int>(static_cast<uint8_t>(c)));
  return b;
}

ordered_json chat_token(const sampler::TokenLogprob& t, const sampler::TokenPieces& pieces) {
  const std::string piece = piece_of(pieces, t.id);
  ordered_json o;
  o["token"] = token_text(piece);
  o["logprob"] = logprob_value(t.logprob);
  o["bytes"] = bytes_of(piece);
  return o;
}

}  // namespace

ordered_json chat_logprobs_json(const sampler::ChoiceLogprobs& c, const sampler::TokenPieces& pieces) {
  ordered_json content = ordered_json::array();
  for (size_t i = 0; i < c.tokens(); ++i) {
    ordered_json t = chat_token(c.chosen(i), pieces);
    ordered_json top = ordered_json::array();
    for (const sampler::TokenLogprob& alt : c.top(i)) top.push_back(chat_token(alt, pieces));
    t["top_logprobs"] = std::move(top);
    content.push_back(std::move(t));
  }
  ordered_json out;
  out["content"] = std::move(content);
  out["refusal"] = nullptr;  // as OpenAI's ChoiceLogprobs: the refusal's tokens, none here
  return out;
}

ordered_json completion_logprobs_json(const sampler::ChoiceLogprobs& c, const sampler::TokenPieces& pieces) {
  ordered_json tokens = ordered_json::array(), token_logprobs = ordered_json::array(),
               top_logprobs = ordered_json::array(), text_offset = ordered_json::array();
  int64_t offset = 0;
  for (size_t i = 0; i < c.tokens(); ++i) {
    const std::string piece = piece_of(pieces, c.chosen(i).id);
    tokens.push_back(token_text(piece));
    token_logprobs.push_back(logprob_value(c.chosen(i).logprob));
    ordered_json top = ordered_json::object();
    for (const sampler::TokenLogprob& alt : c.top(i)) {
      const std::string text = token_text(piece_of(pieces, alt.id));
      if (!top.contains(text)) top[text] = logprob_value(alt.logprob);  // two ids, one text: the likelier one
    }
    top_logprobs.push_back(std::move(top));
    text_offset.push_back(offset);
    for (const char ch : piece) offset += (static_cast<uint8_t>(ch) & 0xC0) != 0x80;
  }
  ordered_json out;
  out["tokens"] = std::move(tokens);
  out["token_logprobs"] = std::move(token_logprobs);
  out["top_logprobs"] = std::move(top_logprobs);
  out["text_offset"] = std::move(text_offset);
  return out;
}

std::string format_batch_success(const BatchSuccess& s) {
  const bool chat = s.endpoint == BatchEndpoint::chat_completions;
  // Every choice's records, decoded once; records that cannot be read fail the export, never a silent null.
  sampler::TokenPieces pieces;
  std::vector<sampler::ChoiceLogprobs> records;
  if (!s.logprobs.empty()) {
    try {
      records = sampler::decode_logprobs(s.logprobs, &pieces);
    } catch (const std::invalid_argument& e) {
      throw Error(ErrorKind::database,
                  "job " + std::to_string(s.job_id) + ": its stored logprobs cannot be read: " + e.what());
    }
  }
  ordered_json choices = ordered_json::array();
  for (size_t k = 0; k <= s.more_choices.size(); ++k) {
    const std::string& text = k == 0 ? s.text : s.more_choices[k - 1].text;
    ordered_json choice;
    choice["index"] = k;
    std::string finish_reason = k == 0 ? s.finish_reason : s.more_choices[k - 1].finish_reason;
    if (chat && s.tool_format) {
      const chat::ParsedReply reply = chat::parse_reply(*s.tool_format, text);
      ordered_json message = {{"role", "assistant"}};
      message["content"] =
          reply.content.empty() && !reply.tool_calls.empty() ? ordered_json(nullptr) : ordered_json(reply.content);
      message["refusal"] = nullptr;  // OpenAI's types require it (nullable): a local model never refuses by API
      if (!reply.reasoning_content.empty()) message["reasoning_content"] = reply.reasoning_content;
      if (!reply.tool_calls.empty()) {
        ordered_json calls = ordered_json::array();
        for (size_t i = 0; i < reply.tool_calls.size(); ++i) {
          const chat::ToolCall& c = reply.tool_calls[i];
          // The format's own id where it has one, made unique across the batch's jobs.
          const std::string id = "call_" + std::to_string(s.job_id) + "_" + std::to_string(k) + "_" + std::to_string(i);
          calls.push_back(
              {{"id", id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
        }
        message["tool_calls"] = std::move(calls);
        if (finish_reason == "stop") finish_reason = "tool_calls";
      }
      choice["message"] = std::move(message);
    } else if (chat) {
      choice["message"] = {{"role", "assistant"}, {"content", text}, {"refusal", nullptr}};
    } else {
      choice["text"] = text;
    }
    if (k < records.size())
      choice["logprobs"] = chat ? chat_logprobs_json(records[k], pieces) : completion_logprobs_json(records[k], pieces);
    else
      choice["logprobs"] = nullptr;
    choice["finish_reason"] = finish_reason;
    choices.push_back(std::move(choice));
  }

  ordered_json body;
  body["id"] = ids_prefix(s.endpoint) + std::to_string(s.job_id);
  body["object"] = chat ? "chat.completion" : "text_completion";
  body["created"] = s.created_unix_s;
  body["model"] = s.model;
  body["choices"] = std::move(choices);
  body["usage"] = {{"prompt_tokens", s.prompt_tokens},
                   {"completion_tokens", s.completion_tokens},
                   {"total_tokens", static_cast<int64_t>(s.prompt_tokens) + s.completion_tokens}};

  ordered_json line;
  line["id"] = "batch_req_" + std::to_string(s.job_id);
  line["custom_id"] = s.custom_id;
  line["response"] = {{"status_code", 200}, {"request_id", "req_" + std::to_string(s.job_id)}, {"body", body}};
  if (s.error_code.empty())
    line["error"] = nullptr;
  else
    line["error"] = {{"code", s.error_code}, {"message", s.error_message}};
  return dump_line(line);
}

std::string format_batch_failure(const BatchFailure& f) {
  ordered_json line;
  line["id"] = "batch_req_" + std::to_string(f.job_id);
  line["custom_id"] = f.custom_id;
  line["response"] = nullptr;
  line["error"] = {{"code", f.code}, {"message", f.message}};
  return dump_line(line);
}

}  // namespace ns::cli
