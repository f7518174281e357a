// nightshiftd's configuration: a YAML file whose keys are all listed in one
// table (config_options()), each with a type, a default and a line of docs.
// The engine's keys are rows of the engine's own table (EngineOptions::for_each,
// engine/api/engine_options.h), read into Config::engine as they are declared there.
//
// Contract: load_config() throws ns::Error(invalid_input) naming the file and
// line for an unknown key (listing the valid ones), a value of the wrong type
// or out of range, or unreadable YAML; ns::Error(io) when the file cannot be
// read. Relative paths (database, model files) are resolved against the
// config file's directory, so a config works wherever the daemon is started.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "engine/api/engine_options.h"

namespace ns::daemon {

// The OpenAI-compatible Files and Batches API the daemon serves (daemon/http/;
// `http:` in the config, docs/operations.md "The HTTP API").
struct HttpConfig {
  std::string listen;                         // "HOST:PORT" (port 0: any free port); "" = the service is off
  std::string keys_file;                      // absolute; "" = no keys (then listen must be a loopback address)
  uint64_t max_file_bytes = 100ull << 20;     // the largest upload
  int max_lines = 50'000;                     // requests in one uploaded file
  std::map<std::string, std::string> models;  // a request's body.model -> a name under models:
  bool operator==(const HttpConfig&) const = default;
};

// "HOST:PORT" or "[V6]:PORT" split; throws ns::Error(invalid_input) naming the problem.
struct ListenAddress {
  std::string host;  // without brackets
  int port = 0;
};
ListenAddress parse_listen_address(const std::string& listen);
// 127.0.0.0/8, ::1 and "localhost".
bool is_loopback_host(const std::string& host);

struct Config {
  std::string source;                         // the file this came from ("" = defaults only)
  std::string database;                       // "" = not set (NIGHTSHIFT_DB, then ./nightshift.db)
  std::string password_file;                  // PostgreSQL: the password's file (absolute); "" = libpq's ways
  std::map<std::string, std::string> models;  // name -> absolute GGUF path
  // name -> the override of its chat template (models.NAME.chat_template): a family name, or a template's text
  std::map<std::string, std::string> chat_templates;
  // threads, context, memory_budget, io_mode, max_batch (engine.max_sequences), ...: the engine's keys, as
  // the daemon loads every model (the table: engine/api/engine_options.h). The daemon's defaults differ from a
  // bare engine's in two: 8 jobs decoded together, and 2 prompt-prefix snapshots.
  EngineOptions engine{.max_sequences = 8, .prefix_cache = 2};
  std::string cpu_features = "auto";  // auto | avx512 | avx2 | scalar: the kernels' ISA path
  std::string claim_models = "any";   // any | configured: which jobs this daemon claims
  std::string log_level = "info";
  int poll_interval_ms = 1000;  // idle wait between claims
  std::string worker_id;        // "" = host:pid (see effective_worker_id)

  // Reliability (docs/operations.md).
  int lease_ms = 60'000;                  // a claim lapses unless renewed; renewed every lease_ms / 3
  int checkpoint_tokens = 32;             // save generated tokens every N tokens (0: never by count)
  int checkpoint_interval_ms = 10'000;    // ... or every S ms (0: never by time)
  int retry_backoff_ms = 5'000;           // first delay after a transient failure or a crash
  int retry_backoff_max_ms = 600'000;     // cap of the doubling delays
  int drain_timeout_ms = 30'000;          // SIGTERM: exit after this even if a token is still computing
  int stall_timeout_ms = 600'000;         // no progress this long: stop renewing the lease and the watchdog
  int busy_timeout_ms = 5'000;            // wait for another writer's lock before a transient error
  std::string synchronous = "full";       // full | normal (PRAGMA synchronous)
  std::string integrity_check = "quick";  // quick | full | off, at start-up

  HttpConfig http;  // off unless http.listen is set
};

// One row of the option table.
struct ConfigOption {
  const char* name;
  const char* type;           // as shown to users: "string", "integer", "boolean", "map"
  const char* default_value;  // as written in YAML
  const char* doc;
  bool reloadable;  // SIGHUP applies it to a running daemon (else: restart)
};

const std::vector<ConfigOption>& config_options();

// Defaults for every key (what an empty file gives).
Config default_config();
Config load_config(const std::string& path);
// Parses YAML text as if read from `path` (relative paths resolve against its directory).
Config parse_config(const std::string& yaml_text, const std::string& path);

// The log levels log_level accepts, in order of verbosity.
const std::vector<std::string>& log_level_names();

// worker_id, or "hostname:pid" when it is empty.
std::string effective_worker_id(const Config& config);

// The keys whose values differ between two configs (for SIGHUP: what
// changed, and which of those need a restart).
std::vector<std::string> changed_keys(const Config& a, const Config& b);
bool is_reloadable(const std::string& key);

}  // namespace ns::daemon
