#include "daemon/lib/config.h"

#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "engine/util/error.h"

namespace ns::daemon {
namespace {

namespace fs = std::filesystem;

struct Context {
  std::string path;      // the config file, as given
  fs::path directory;    // where relative paths resolve
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

int as_int(const Context& ctx, const std::string& key, const YAML::Node& node, long long min, long long max) {
  if (!node.IsScalar()) reject(ctx, node, key + " must be an integer, got " + node_kind(node));
  long long v = 0;
  try {
    v = node.as<long long>();
  } catch (const YAML::BadConversion&) {
    reject(ctx, node, key + " must be an integer, got '" + node.Scalar() + "'");
  }
  if (v < min || v > max) {
    reject(ctx, node, key + " = " + std::to_string(v) + " is out of range: allowed " + std::to_string(min) +
                          ".." + std::to_string(max));
  }
  return static_cast<int>(v);
}

std::string resolve_path(const Context& ctx, const std::string& p) {
  const fs::path path(p);
  if (path.is_absolute()) return path.lexically_normal().string();
  return (ctx.directory / path).lexically_normal().string();
}

struct Option {
  ConfigOption info;
  std::function<void(Config&, const YAML::Node&, const Context&)> apply;
};

// The one table of options. examples/config.yaml documents each of them (a
// unit test keeps the two in step).
const std::vector<Option>& option_table() {
  static const std::vector<Option> kOptions = {
      {{"database", "string", "\"\"",
        "SQLite queue file; relative to this file's directory. Empty: $NIGHTSHIFT_DB, else ./nightshift.db"},
       [](Config& c, const YAML::Node& n, const Context& ctx) {
         const std::string v = as_string(ctx, "database", n);
         c.database = v.empty() ? v : resolve_path(ctx, v);
       }},
      {{"models", "map", "{}",
        "model name -> GGUF file; jobs name a model; relative paths resolve against this file's directory"},
       [](Config& c, const YAML::Node& n, const Context& ctx) {
         if (!n.IsMap()) reject(ctx, n, std::string("models must be a mapping of name: path, got ") + node_kind(n));
         for (const auto& kv : n) {
           const std::string name = as_string(ctx, "a model name", kv.first);
           if (name.empty()) reject(ctx, kv.first, "a model name is empty");
           const std::string file = as_string(ctx, "models." + name, kv.second);
           if (file.empty()) reject(ctx, kv.second, "models." + name + " has an empty path");
           if (c.models.count(name) != 0) reject(ctx, kv.first, "model '" + name + "' is listed twice");
           c.models[name] = resolve_path(ctx, file);
         }
       }},
      {{"threads", "integer", "0", "compute threads; 0 = all cores"},
       [](Config& c, const YAML::Node& n, const Context& ctx) { c.threads = as_int(ctx, "threads", n, 0, 4096); }},
      {{"context", "integer", "0", "KV cache length in tokens; 0 = the model's, capped at 4096"},
       [](Config& c, const YAML::Node& n, const Context& ctx) {
         c.context = as_int(ctx, "context", n, 0, 1 << 24);
       }},
      {{"log_level", "string", "info", "trace, debug, info, warn, error, critical or off"},
       [](Config& c, const YAML::Node& n, const Context& ctx) {
         const std::string v = as_string(ctx, "log_level", n);
         const auto& names = log_level_names();
         if (std::find(names.begin(), names.end(), v) == names.end()) {
           std::string list;
           for (const auto& l : names) list += (list.empty() ? "" : ", ") + l;
           reject(ctx, n, "log_level '" + v + "' is not one of: " + list);
         }
         c.log_level = v;
       }},
      {{"poll_interval_ms", "integer", "1000", "how long an idle daemon waits before looking for new jobs"},
       [](Config& c, const YAML::Node& n, const Context& ctx) {
         c.poll_interval_ms = as_int(ctx, "poll_interval_ms", n, 10, 3'600'000);
       }},
      {{"worker_id", "string", "\"\"", "name written to jobs.worker; empty = hostname:pid"},
       [](Config& c, const YAML::Node& n, const Context& ctx) { c.worker_id = as_string(ctx, "worker_id", n); }},
  };
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
    if (opt == table.end()) reject(ctx, kv.first, "unknown key '" + key + "'; valid keys: " + valid_keys());
    if (kv.second.IsNull()) continue;  // `key:` with no value keeps the default
    opt->apply(config, kv.second, ctx);
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

std::string effective_worker_id(const Config& config) {
  if (!config.worker_id.empty()) return config.worker_id;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "localhost");
  return std::string(host) + ":" + std::to_string(getpid());
}

}  // namespace ns::daemon
