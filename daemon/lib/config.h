// nightshiftd's configuration: a YAML file whose keys are all listed in one
// table (config_options()), each with a type, a default and a line of docs.
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

namespace ns::daemon {

struct Config {
  std::string source;                         // the file this came from ("" = defaults only)
  std::string database;                       // "" = not set (NIGHTSHIFT_DB, then ./nightshift.db)
  std::map<std::string, std::string> models;  // name -> absolute GGUF path
  int threads = 0;                            // 0 = all cores
  int context = 0;                            // 0 = the model's, capped by the engine
  std::string log_level = "info";
  int poll_interval_ms = 1000;                // idle wait between claims
  std::string worker_id;                      // "" = host:pid (see effective_worker_id)
};

// One row of the option table.
struct ConfigOption {
  const char* name;
  const char* type;           // as shown to users: "string", "integer", "map"
  const char* default_value;  // as written in YAML
  const char* doc;
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

}  // namespace ns::daemon
