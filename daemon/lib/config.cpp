#include "daemon/lib/config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>
#include <sstream>
#include <type_traits>

#include "engine/chat/chat_template.h"
#include "engine/engine.h"
#include "common/edit_distance.h"
#include "common/error.h"
#include "common/human_size.h"
#include "jobs/open_queue.h"

namespace ns::daemon {
namespace {

namespace fs = std::filesystem;

struct Context {
  std::string path;    // the config file, as given
  fs::path directory;  // where relative paths resolve
};

std::string where(const Context& ctx, const YAML::Node& node) {
  const YAML::Mark m = node.Mark();
  if (m.is_null()) return ctx.path;
  return ctx.path + ":" + std::to_string(m.line + 1);
}

[[noreturn]] void reject(const Context& ctx, const YAML::Node& node, const std::string& what) {
  throw Error(ErrorKind::invalid_input, "config " + where(ctx, node) + ": " + what);
}

const char* node_kind(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Null: return "nothing";
    default: return "a value";
  }
}

std::string as_string(const Context& ctx, const std::string& key, const YAML::Node& node) {
  if (!node.IsScalar()) reject(ctx, node, key + " must be a string, got " + node_kind(node));
  return node.Scalar();
}

long long as_int(const Context& ctx, const std::string& key, const YAML::Node& node, long long min, long long max) {
  if (!node.IsScalar()) reject(ctx, node, key + " must be an integer, got " + node_kind(node));
  long long v = 0;
  try {
    v = node.as<long long>();
  } catch (const YAML::BadConversion&) {
    reject(ctx, node, key + " must be an integer, got '" + node.Scalar() + "'");
  }
  if (v < min || v > max) {
    reject(ctx, node,
           key + " = " + std::to_string(v) + " is out of range: allowed " + std::to_string(min) + ".." +
               std::to_string(max));
  }
  return v;
}

bool as_bool(const Context& ctx, const std::string& key, const YAML::Node& node) {
  bool v = false;
  if (!node.IsScalar() || !YAML::convert<bool>::decode(node, v))
    reject(ctx, node,
           key + " must be true or false, got " + (node.IsScalar() ? "'" + node.Scalar() + "'" : node_kind(node)));
  return v;
}

std::string resolve_path(const Context& ctx, const std::string& p) {
  const fs::path path(p);
  if (path.is_absolute()) return path.lexically_normal().string();
  return (ctx.directory / path).lexically_normal().string();
}

struct Option {
  ConfigOption info;
  std::function<void(Config&, const YAML::Node&, const Context&)> apply;
  std::function<bool(const Config&, const Config&)> same;  // for changed_keys()
};

// `same` for a key stored in `member`.
template <class T>
std::function<bool(const Config&, const Config&)> same_member(T Config::*member) {
  return [member](const Config& a, const Config& b) { return a.*member == b.*member; };
}

// A string value that must be one of `allowed`.
std::string one_of(const Context& ctx, const YAML::Node& n, const std::string& key,
                   const std::vector<std::string>& allowed) {
  const std::string v = as_string(ctx, key, n);
  if (std::find(allowed.begin(), allowed.end(), v) != allowed.end()) return v;
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  reject(ctx, n, key + " '" + v + "' is not one of: " + list);
}

// A row for an integer key stored in `member`.
Option int_option(const char* name, const char* default_value, long long min, long long max, bool reloadable,
                  const char* doc, int Config::*member) {
  return {{name, "integer", default_value, doc, reloadable},
          [=](Config& c, const YAML::Node& n, const Context& ctx) {
    c.*member = static_cast<int>(as_int(ctx, name, n, min, max));
          },
          same_member(member)};
}

// A row for a string key stored in `member` whose value must be one of `allowed`.
Option choice_option(const char* name, const char* default_value, std::vector<std::string> allowed, bool reloadable,
                     const char* doc, std::string Config::*member) {
  return {{name, "string", default_value, doc, reloadable},
          [=](Config& c, const YAML::Node& n, const Context& ctx) { c.*member = one_of(ctx, n, name, allowed); },
          same_member(member)};
}

// The http: section (one key of the table: its fields are checked here).
HttpConfig parse_http(const Context& ctx, const YAML::Node& n) {
  if (!n.IsMap()) reject(ctx, n, std::string("http must be a mapping (listen, keys_file, ...), got ") + node_kind(n));
  HttpConfig h;
  for (const auto& kv : n) {
    const std::string key = as_string(ctx, "a key of http", kv.first);
    const YAML::Node& v = kv.second;
    if (key == "listen") {
      h.listen = as_string(ctx, "http.listen", v);
      try {
        if (!h.listen.empty()) parse_listen_address(h.listen);
      } catch (const Error& e) {
        reject(ctx, v, e.what());
      }
    } else if (key == "keys_file") {
      const std::string f = as_string(ctx, "http.keys_file", v);
      h.keys_file = f.empty() ? f : resolve_path(ctx, f);
    } else if (key == "max_file_bytes") {
      try {
        h.max_file_bytes = parse_size(as_string(ctx, "http.max_file_bytes", v));
      } catch (const Error& e) {
        reject(ctx, v, std::string("http.max_file_bytes: ") + e.what());
      }
      if (h.max_file_bytes == 0 || h.max_file_bytes > (1ull << 30))
        reject(ctx, v, "http.max_file_bytes must be between 1 byte and 1GiB (a file is held in the database)");
    } else if (key == "max_lines") {
      h.max_lines = static_cast<int>(as_int(ctx, "http.max_lines", v, 1, 10'000'000));
    } else if (key == "models") {
      if (!v.IsMap())
        reject(ctx, v, std::string("http.models must be a mapping of API-NAME: MODEL, got ") + node_kind(v));
      for (const auto& m : v) {
        const std::string from = as_string(ctx, "a name under http.models", m.first);
        const std::string to = as_string(ctx, "http.models." + from, m.second);
        if (from.empty() || to.empty()) reject(ctx, m.first, "http.models." + from + ": an empty name");
        h.models[from] = to;
      }
    } else {
      reject(ctx, kv.first,
             "http." + key + " is not a field: give listen, keys_file, max_file_bytes, max_lines, models");
    }
  }
  if (!h.listen.empty() && h.keys_file.empty() && !is_loopback_host(parse_listen_address(h.listen).host)) {
    reject(ctx, n,
           "http.listen " + h.listen +
               " is not a loopback address and no http.keys_file is set: anyone "
               "who can reach it could queue jobs; give keys_file: FILE (one key a line), or listen on "
               "127.0.0.1:PORT");
  }
  return h;
}

// An engine key's value, read as its type in the engine's table says.
template <class T>
void read_engine_value(T& member, const OptionInfo& info, const YAML::Node& n, const Context& ctx) {
  if constexpr (std::is_same_v<T, bool>) {
    member = as_bool(ctx, info.name, n);
  } else if constexpr (std::is_same_v<T, uint64_t>) {  // a size: 8GiB
    try {
      member = parse_option_bytes(info.name, as_string(ctx, info.name, n));
    } catch (const Error& e) {
      reject(ctx, n, e.what());
    }
  } else if constexpr (std::is_integral_v<T>) {
    member = static_cast<T>(as_int(ctx, info.name, n, info.min, info.max));
  } else if constexpr (std::is_same_v<T, std::string>) {
    member = as_string(ctx, info.name, n);
  } else {  // a Choice: io_mode, cache_policy
    try {
      member = T::parse(as_string(ctx, info.name, n));
    } catch (const Error& e) {
      reject(ctx, n, e.what());
    }
  }
}

template <class T>
const char* yaml_type(const T&) {
  if constexpr (std::is_same_v<T, bool>)
    return "boolean";
  else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, uint64_t>)
    return "integer";
  else
    return "string";
}

// The engine's config keys: the rows of its table (EngineOptions::for_each)
// marked config_key, with the daemon's defaults (Config::engine). Each is
// applied at the next model load.
std::vector<Option> engine_rows() {
  static const Config defaults = default_config();
  // The rows' strings must outlive the table (ConfigOption holds char pointers; a deque never moves them).
  static std::deque<std::string> texts;
  std::vector<Option> rows;
  EngineOptions::for_each(defaults.engine, [&](const auto& value, const OptionInfo& info) {
    if (!info.config_key) return;
    const std::string name = info.name;
    texts.push_back(option_text(value));
    const char* default_text = texts.back().c_str();
    texts.push_back(std::string(info.doc) + " (applies at the next model load)");
    const char* doc = texts.back().c_str();
    rows.push_back({{info.name, yaml_type(value), default_text, doc, true},
                    [name](Config& c, const YAML::Node& n, const Context& ctx) {
      EngineOptions::for_each(c.engine, [&](auto& member, const OptionInfo& i) {
        if (name == i.name) read_engine_value(member, i, n, ctx);
      });
                    },
                    [name](const Config& a, const Config& b) {
      return engine_option_text(a.engine, name) == engine_option_text(b.engine, name);
    }});
  });
  return rows;
}

// The one table of options. examples/config.yaml documents each of them (a
// unit test keeps the two in step).
const std::vector<Option>& option_table() {
  static const std::vector<Option> kOptions = [] {
    std::vector<Option>
        rows =
            {
                {{"database", "string", "\"\"",
                  "the queue: a SQLite file (relative to this file's directory) or a postgresql:// URL shared by a fleet "
                  "(docs/fleet.md). Empty: $NIGHTSHIFT_DB, else ./nightshift.db",
                  false},
                 [](Config& c, const YAML::Node& n, const Context& ctx) {
      const std::string v = as_string(ctx, "database", n);
      c.database = v.empty() || jobs::is_postgres_url(v) ? v : resolve_path(ctx, v);
                 },
                 same_member(&Config::database)},
                {{"password_file", "string", "\"\"",
                  "PostgreSQL: a file holding the database password alone (mode 0600, the daemon user's; relative to this "
                  "file's directory), so the secret is in no URL, `ps` line or log. Empty: libpq's PGPASSFILE or ~/.pgpass "
                  "(docs/fleet.md)",
                  false},
                 [](Config& c, const YAML::Node& n, const Context& ctx) {
      const std::string v = as_string(ctx, "password_file", n);
      c.password_file = v.empty() ? v : resolve_path(ctx, v);
                 },
                 same_member(&Config::password_file)},
        {{"models", "map", "{}",
          "model name -> GGUF file (any shard of a split model), or -> {path: FILE, chat_template: FAMILY-OR-FILE} to "
          "render its chat jobs with a named family (chatml, llama3, ...) or a Jinja template file instead of the "
          "GGUF's own template; jobs name a model; relative paths resolve against this file's directory",
          true},
         [](Config& c, const YAML::Node& n, const Context& ctx) {
      if (!n.IsMap()) reject(ctx, n, std::string("models must be a mapping of name: path, got ") + node_kind(n));
      for (const auto& kv : n) {
        const std::string name = as_string(ctx, "a model name", kv.first);
        if (name.empty()) reject(ctx, kv.first, "a model name is empty");
        if (c.models.count(name) != 0) reject(ctx, kv.first, "model '" + name + "' is listed twice");
        // (A YAML::Node is a reference: assigning one writes into the node it refers to, so `path` is bound once.)
        const YAML::Node path = kv.second.IsMap() ? kv.second["path"] : kv.second;
        if (kv.second.IsMap()) {
          for (const auto& field : kv.second) {
            const std::string key = as_string(ctx, "a key of models." + name, field.first);
            if (key != "path" && key != "chat_template")
              reject(ctx, field.first, "models." + name + "." + key + " is not a field: give path and chat_template");
          }
          if (!path) reject(ctx, kv.second, "models." + name + " has no path");
          if (const YAML::Node t = kv.second["chat_template"]) {
            const std::string v = as_string(ctx, "models." + name + ".chat_template", t);
            if (v.empty()) reject(ctx, t, "models." + name + ".chat_template is empty");
            if (chat::template_from_name(v)) {
              c.chat_templates[name] = v;
            } else {
              std::ifstream in(resolve_path(ctx, v), std::ios::binary);
              if (!in)
                reject(ctx, t,
                       "models." + name + ".chat_template '" + v + "' is neither a family (" +
                           chat::supported_template_names() + ") nor a readable template file");
              c.chat_templates[name] = std::string(std::istreambuf_iterator<char>(in), {});
            }
          }
        }
        const std::string file = as_string(ctx, "models." + name, path);
        if (file.empty()) reject(ctx, path, "models." + name + " has an empty path");
        c.models[name] = resolve_path(ctx, file);
      }
         },
         [](const Config& a, const Config& b) { return a.models == b.models && a.chat_templates == b.chat_templates; }},
        {{"cpu_features", "string", "auto",
          "which compute kernels run: auto (the best this CPU has), avx512 (AVX-512 with VNNI), avx2 or scalar "
          "(the reference); a path the CPU lacks is an error naming what it has. For comparisons and tests",
          true},
         [](Config& c, const YAML::Node& n, const Context& ctx) {
      c.cpu_features = one_of(ctx, n, "cpu_features", {"auto", "avx512", "avx2", "scalar"});
      try {
        check_cpu_features(c.cpu_features);
      } catch (const Error& e) {
        reject(ctx, n, e.what());
      }
         },
         same_member(&Config::cpu_features)},
        choice_option("claim_models", "any", {"any", "configured"}, true,
                      "which jobs this daemon claims: any (a job naming a model not under models: goes back to the "
                      "queue, and the daemon says so) or "
                      "configured (only jobs for its own models; for fleets whose machines hold different models)",
                      &Config::claim_models),
        choice_option("log_level", "info", log_level_names(), true, "trace, debug, info, warn, error, critical or off",
                      &Config::log_level),
        int_option("poll_interval_ms", "1000", 10, 3'600'000, true,
                   "how long an idle daemon waits before looking for new jobs", &Config::poll_interval_ms),
        {{"worker_id", "string", "\"\"", "name written to jobs.worker; empty = hostname:pid", false},
         [](Config& c, const YAML::Node& n, const Context& ctx) { c.worker_id = as_string(ctx, "worker_id", n); },
         same_member(&Config::worker_id)},
        int_option("lease_ms", "60000", 300, 86'400'000, true,
                   "a claimed job is this daemon's for this long unless renewed (every lease_ms / 3); "
                   "after that another daemon may take it over",
                   &Config::lease_ms),
        int_option("checkpoint_tokens", "32", 0, 1'000'000, true,
                   "save the generated tokens every N tokens so a crash resumes there; 0 = not by count",
                   &Config::checkpoint_tokens),
        int_option("checkpoint_interval_ms", "10000", 0, 86'400'000, true,
                   "... and at least every S ms while tokens come; 0 = not by time", &Config::checkpoint_interval_ms),
        int_option("retry_backoff_ms", "5000", 0, 86'400'000, true,
                   "delay before the first retry of a job after a transient failure or a crash; doubles per "
                   "attempt, with jitter",
                   &Config::retry_backoff_ms),
        int_option("retry_backoff_max_ms", "600000", 0, 86'400'000, true, "the longest delay between retries",
                   &Config::retry_backoff_max_ms),
        int_option("drain_timeout_ms", "30000", 100, 86'400'000, true,
                   "on SIGTERM, exit after this long even if the current token is still computing (the job "
                   "then resumes from its last checkpoint)",
                   &Config::drain_timeout_ms),
        int_option("stall_timeout_ms", "600000", 1000, 86'400'000, true,
                   "a job that shows no progress (no token, no prefill chunk) for this long is considered hung: "
                   "its lease is no longer renewed, so another daemon takes it over, and the systemd watchdog "
                   "restarts this one",
                   &Config::stall_timeout_ms),
        int_option("busy_timeout_ms", "5000", 0, 3'600'000, false,
                   "how long a database write waits for another process's lock before it is retried later",
                   &Config::busy_timeout_ms),
        choice_option("synchronous", "full", {"full", "normal"}, false,
                      "full: every commit is on disk when it returns; normal: faster, a power cut may undo the last "
                      "commits",
                      &Config::synchronous),
        choice_option("integrity_check", "quick", {"quick", "full", "off"}, false,
                      "database check at start-up: quick (pages and rows), full (also indexes; slower) or off",
                      &Config::integrity_check),
        {{"http", "map", "{}",
          "the OpenAI-compatible Files and Batches API (docs/operations.md): {listen: HOST:PORT, keys_file: FILE, "
          "max_file_bytes: 100MiB, max_lines: 50000, models: {API-NAME: MODEL}}; off unless listen is set; without "
          "keys_file it listens on loopback only (restart to apply)",
          false},
         [](Config& c, const YAML::Node& n, const Context& ctx) { c.http = parse_http(ctx, n); },
         same_member(&Config::http)},
        };
    // The engine's keys after models:, as the examples list them.
    const std::vector<Option> engine = engine_rows();
    rows.insert(rows.begin() + 2, engine.begin(), engine.end());
    return rows;
  }();
  return kOptions;
}

std::string valid_keys() {
  std::string list;
  for (const Option& o : option_table()) list += (list.empty() ? "" : ", ") + std::string(o.info.name);
  return list;
}

}  // namespace

const std::vector<ConfigOption>& config_options() {
  static const std::vector<ConfigOption> kInfo = [] {
    std::vector<ConfigOption> v;
    for (const Option& o : option_table()) v.push_back(o.info);
    return v;
  }();
  return kInfo;
}

const std::vector<std::string>& log_level_names() {
  static const std::vector<std::string> kNames = {"trace", "debug", "info", "warn", "error", "critical", "off"};
  return kNames;
}

Config default_config() { return Config{}; }

ListenAddress parse_listen_address(const std::string& listen) {
  const auto bad = [&](const std::string& why) -> Error {
    return Error(ErrorKind::invalid_input,
                 "http.listen '" + listen + "': " + why + " (give HOST:PORT, e.g. 127.0.0.1:8080)");
  };
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0) throw bad("no host and port");
  ListenAddress a;
  a.host = listen.substr(0, colon);
  if (a.host.size() >= 2 && a.host.front() == '[' && a.host.back() == ']') a.host = a.host.substr(1, a.host.size() - 2);
  const std::string port = listen.substr(colon + 1);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos)
    throw bad("bad port");
  a.port = std::stoi(port);
  if (a.port > 65535) throw bad("port above 65535");
  if (a.host.empty()) throw bad("no host");
  return a;
}

bool is_loopback_host(const std::string& host) {
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return host == "localhost";
}

Config parse_config(const std::string& yaml_text, const std::string& path) {
  Context ctx{path, fs::absolute(fs::path(path)).parent_path()};
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::ParserException& e) {
    throw Error(ErrorKind::invalid_input, "config " + path + ":" + std::to_string(e.mark.line + 1) + ":" +
                                              std::to_string(e.mark.column + 1) + ": YAML syntax error: " + e.msg);
  }
  Config config = default_config();
  config.source = path;
  if (root.IsNull()) return config;  // an empty file: all defaults
  if (!root.IsMap()) reject(ctx, root, "the config must be a mapping of `key: value` lines");

  std::map<std::string, int> seen;  // key -> line, to report duplicates
  for (const auto& kv : root) {
    const std::string key = as_string(ctx, "a key", kv.first);
    const int line = kv.first.Mark().line + 1;
    if (auto it = seen.find(key); it != seen.end()) {
      reject(ctx, kv.first, key + " is set twice (first on line " + std::to_string(it->second) + ")");
    }
    seen[key] = line;
    const auto& table = option_table();
    auto opt = std::find_if(table.begin(), table.end(), [&](const Option& o) { return key == o.info.name; });
    if (opt == table.end()) {
      std::string close;  // a typo's likely meaning first (#31: `memory_budjet` got only the list)
      for (const Option& o : table) {
        if (edit_distance(key, o.info.name) <= 2) close += (close.empty() ? "'" : "', '") + std::string(o.info.name);
      }
      reject(ctx, kv.first,
             "unknown key '" + key + "'" + (close.empty() ? "" : "; did you mean " + close + "'?") +
                 "; valid keys: " + valid_keys());
    }
    if (kv.second.IsNull()) continue;  // `key:` with no value keeps the default
    opt->apply(config, kv.second, ctx);
  }
  for (const auto& [from, to] : config.http.models) {
    if (config.models.count(to) == 0)
      reject(ctx, root["http"], "http.models." + from + " names model '" + to + "', which is not under models:");
  }
  return config;
}

Config load_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    throw Error(ErrorKind::io, "cannot read config " + path + ": " + std::strerror(errno) +
                                   " (see examples/config.yaml for a documented example)");
  }
  std::stringstream text;
  text << in.rdbuf();
  return parse_config(text.str(), path);
}

std::vector<std::string> changed_keys(const Config& a, const Config& b) {
  std::vector<std::string> out;
  for (const Option& o : option_table()) {
    if (!o.same(a, b)) out.emplace_back(o.info.name);
  }
  return out;
}

bool is_reloadable(const std::string& key) {
  for (const Option& o : option_table()) {
    if (key == o.info.name) return o.info.reloadable;
  }
  return false;
}

std::string effective_worker_id(const Config& config) {
  if (!config.worker_id.empty()) return config.worker_id;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "localhost");
  return std::string(host) + ":" + std::to_string(getpid());
}

}  // namespace ns::daemon
