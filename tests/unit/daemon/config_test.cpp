// The daemon config: defaults, every key, errors with line numbers, relative
// paths, the database lookup order, and the documented example staying in step.
#include <doctest/doctest.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "daemon/lib/config.h"
#include "daemon/lib/database_path.h"
#include "daemon/lib/job_run.h"
#include "daemon/lib/logging.h"
#include "engine/kernels/kernels.h"
#include "engine/util/thread_pool.h"
#include "common/error.h"
#include "tests/unit/jobs/temp_dir.h"

using namespace ns::daemon;

namespace {

// The error message parse_config gives for `yaml`, or "" if it parsed.
std::string error_for(const std::string& yaml) {
  try {
    parse_config(yaml, "/etc/nightshift/config.yaml");
  } catch (const ns::Error& e) {
    CHECK(e.kind() == ns::ErrorKind::invalid_input);
    return e.what();
  }
  return "";
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::filesystem::path repo_root() { return std::filesystem::path(NS_SOURCE_DIR); }

}  // namespace

TEST_CASE("an empty config gives every default") {
  for (const std::string text : {"", "# only a comment\n", "---\n"}) {
    Config c = parse_config(text, "/etc/nightshift/config.yaml");
    CHECK(c.database.empty());
    CHECK(c.models.empty());
    CHECK(c.engine.threads == 0);
    CHECK(c.engine.thread_spin_us == ns::ThreadPool::kDefaultSpinUs);  // the config's default is the pool's
    CHECK(c.engine.context == 0);
    CHECK(c.log_level == "info");
    CHECK(c.poll_interval_ms == 1000);
    CHECK(c.worker_id.empty());
    CHECK(c.source == "/etc/nightshift/config.yaml");
  }
}

TEST_CASE("every key is read; relative paths resolve against the config's directory") {
  Config c = parse_config(R"(
database: data/queue.db
models:
  tiny: models/tiny.gguf
  big: /srv/models/big.gguf
  up: ../shared/up.gguf
threads: 6
thread_spin_us: 0
context: 8192
log_level: debug
poll_interval_ms: 250
worker_id: night-1
prefix_cache: 0
)",
                          "/etc/nightshift/config.yaml");
  CHECK(c.database == "/etc/nightshift/data/queue.db");
  REQUIRE(c.models.size() == 3);
  CHECK(c.models.at("tiny") == "/etc/nightshift/models/tiny.gguf");
  CHECK(c.models.at("big") == "/srv/models/big.gguf");
  CHECK(c.models.at("up") == "/etc/shared/up.gguf");
  CHECK(c.engine.threads == 6);
  CHECK(c.engine.thread_spin_us == 0);
  CHECK(c.engine.context == 8192);
  CHECK(c.engine.prefix_cache == 0);  // prefix sharing off (default 2)
  CHECK(default_config().engine.prefix_cache == 2);
  CHECK(c.log_level == "debug");
  CHECK(c.poll_interval_ms == 250);
  CHECK(c.worker_id == "night-1");
}

TEST_CASE("a key with no value keeps its default") {
  Config c = parse_config("threads:\nmodels:\nlog_level: warn\n", "/x/c.yaml");
  CHECK(c.engine.threads == 0);
  CHECK(c.models.empty());
  CHECK(c.log_level == "warn");
}

TEST_CASE("an unknown key is rejected with its line number and the valid keys") {
  const std::string msg = error_for("threads: 2\nmodels: {}\n\ntreads: 4\n");
  CHECK_MESSAGE(contains(msg, "/etc/nightshift/config.yaml:4:"), msg);
  CHECK_MESSAGE(contains(msg, "unknown key 'treads'; did you mean 'threads'?"), msg);
  for (const ConfigOption& o : config_options()) CHECK_MESSAGE(contains(msg, o.name), msg);
}

TEST_CASE("wrong types and out-of-range values name the key, the line and what is allowed") {
  struct Case {
    const char* yaml;
    const char* line;
    const char* expect;
  };
  const Case cases[] = {
      {"threads: many\n", ":1:", "threads must be an integer, got 'many'"},
      {"log_level: info\nthreads: [1, 2]\n", ":2:", "threads must be an integer, got a list"},
      {"threads: 1.5\n", ":1:", "threads must be an integer"},
      {"threads: -1\n", ":1:", "threads = -1 is out of range"},
      {"\ncontext: true\n", ":2:", "context must be an integer"},
      {"poll_interval_ms: 0\n", ":1:", "poll_interval_ms = 0 is out of range: allowed 10..3600000"},
      {"log_level: loud\n", ":1:", "log_level 'loud' is not one of: trace, debug, info, warn, error, critical, off"},
      {"models:\n  - a.gguf\n", ":2:", "models must be a mapping of name: path, got a list"},
      {"models:\n  tiny: [a, b]\n", ":2:", "models.tiny must be a string, got a list"},
      {"models:\n  tiny: ''\n", ":2:", "models.tiny has an empty path"},
      {"database: {path: x}\n", ":1:", "database must be a string, got a mapping"},
      {"worker_id: [a]\n", ":1:", "worker_id must be a string"},
      {"threads: 1\nthreads: 2\n", ":2:", "threads is set twice (first on line 1)"},
      {"- just\n- a list\n", ":1:", "must be a mapping"},
  };
  for (const Case& c : cases) {
    const std::string msg = error_for(c.yaml);
    CHECK_MESSAGE(contains(msg, c.line), c.yaml << " -> " << msg);
    CHECK_MESSAGE(contains(msg, c.expect), c.yaml << " -> " << msg);
  }
}

TEST_CASE("a YAML syntax error reports line and column") {
  const std::string msg = error_for("threads: 2\nmodels: {tiny: a.gguf\n");
  CHECK_MESSAGE(contains(msg, "YAML syntax error"), msg);
  CHECK_MESSAGE(contains(msg, "/etc/nightshift/config.yaml:"), msg);
}

TEST_CASE("load_config reads a file and resolves paths next to it") {
  ns::test::TempDir dir;
  const std::string path = dir.file("config.yaml");
  std::ofstream(path) << "database: q.db\nmodels:\n  tiny: m/tiny.gguf\n";
  Config c = load_config(path);
  CHECK(c.database == (dir.path() / "q.db").string());
  CHECK(c.models.at("tiny") == (dir.path() / "m/tiny.gguf").string());

  try {
    load_config(dir.file("missing.yaml"));
    FAIL("loaded a missing file");
  } catch (const ns::Error& e) {
    CHECK(e.kind() == ns::ErrorKind::io);
    CHECK_MESSAGE(contains(e.what(), "missing.yaml"), e.what());
  }
}

TEST_CASE("examples/config.yaml parses and documents every option") {
  const std::filesystem::path example = repo_root() / "examples" / "config.yaml";
  REQUIRE_MESSAGE(std::filesystem::exists(example), example.string());
  Config c = load_config(example.string());
  CHECK_FALSE(c.models.empty());  // the example shows how models are named

  // Each option appears as a key (commented or not) followed by its default.
  std::ifstream in(example);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const ConfigOption& o : config_options()) {
    CHECK_MESSAGE(contains(text, std::string(o.name) + ":"), o.name << " is not in " << example);
    CHECK_MESSAGE(contains(text, std::string("default: ") + o.default_value),
                  o.name << " default " << o.default_value << " is not documented in " << example);
  }
}

TEST_CASE("the option table has one row per key with a doc and a default") {
  std::set<std::string> names;
  for (const ConfigOption& o : config_options()) {
    CHECK(names.insert(o.name).second);
    CHECK(std::string(o.doc).size() > 10);
    CHECK(std::string(o.default_value).size() > 0);
  }
  CHECK(names == std::set<std::string>{"database",
                                       "password_file",
                                       "models",
                                       "threads",
                                       "thread_spin_us",
                                       "context",
                                       "memory_budget",
                                       "io_mode",
                                       "cpu_features",
                                       "repack_experts",
                                       "preload_experts",
                                       "max_batch",
                                       "prefix_cache",
                                       "claim_models",
                                       "log_level",
                                       "poll_interval_ms",
                                       "worker_id",
                                       "lease_ms",
                                       "checkpoint_tokens",
                                       "checkpoint_interval_ms",
                                       "retry_backoff_ms",
                                       "retry_backoff_max_ms",
                                       "drain_timeout_ms",
                                       "stall_timeout_ms",
                                       "busy_timeout_ms",
                                       "synchronous",
                                       "integrity_check",
                                       "http"});
}

TEST_CASE("http: off by default; its fields, aliases and the loopback rule") {
  Config d = parse_config("", "/etc/nightshift/config.yaml");
  CHECK(d.http.listen.empty());
  CHECK(d.http.max_file_bytes == 100ull << 20);
  CHECK(d.http.max_lines == 50000);

  Config c = parse_config(
      "models:\n  tiny: tiny.gguf\nhttp:\n  listen: 127.0.0.1:8080\n  keys_file: keys\n"
      "  max_file_bytes: 2MiB\n  max_lines: 10\n  models:\n    gpt-4o-mini: tiny\n",
      "/etc/nightshift/config.yaml");
  CHECK(c.http.listen == "127.0.0.1:8080");
  CHECK(c.http.keys_file == "/etc/nightshift/keys");
  CHECK(c.http.max_file_bytes == 2u << 20);
  CHECK(c.http.max_lines == 10);
  CHECK(c.http.models.at("gpt-4o-mini") == "tiny");
  // Any address with keys; loopback without.
  CHECK(error_for("http:\n  listen: 0.0.0.0:8080\n  keys_file: /k\n").empty());
  CHECK(error_for("http:\n  listen: '[::1]:8080'\n").empty());
  CHECK(error_for("http:\n  listen: localhost:0\n").empty());

  std::string e = error_for("http:\n  listen: 0.0.0.0:8080\n");
  CHECK_MESSAGE(contains(e, "not a loopback address and no http.keys_file"), e);
  CHECK_MESSAGE(contains(e, "config.yaml:2"), e);
  e = error_for("http:\n  listen: 127.0.0.1\n");
  CHECK_MESSAGE(contains(e, "give HOST:PORT"), e);
  e = error_for("http:\n  listen: 127.0.0.1:99999\n");
  CHECK_MESSAGE(contains(e, "port"), e);
  e = error_for("http:\n  lisen: 127.0.0.1:8080\n");
  CHECK_MESSAGE(contains(e, "http.lisen is not a field"), e);
  e = error_for("models:\n  tiny: t.gguf\nhttp:\n  models:\n    gpt-4o: kimi\n");
  CHECK_MESSAGE(contains(e, "http.models.gpt-4o names model 'kimi', which is not under models:"), e);
  e = error_for("http:\n  max_file_bytes: 2GiB\n");
  CHECK_MESSAGE(contains(e, "max_file_bytes"), e);

  CHECK(is_loopback_host("127.0.0.1"));
  CHECK(is_loopback_host("127.1.2.3"));
  CHECK(is_loopback_host("::1"));
  CHECK(is_loopback_host("localhost"));
  CHECK_FALSE(is_loopback_host("127.example.com"));
  CHECK_FALSE(is_loopback_host("0.0.0.0"));
  CHECK_FALSE(is_loopback_host("::"));
  CHECK_FALSE(is_loopback_host("10.0.0.1"));
  CHECK(parse_listen_address("[::1]:80").host == "::1");
  CHECK(parse_listen_address("[::1]:80").port == 80);
}

TEST_CASE("the reliability keys: defaults, values, ranges") {
  Config d = parse_config("", "/x/c.yaml");
  CHECK(d.lease_ms == 60000);
  CHECK(d.checkpoint_tokens == 32);
  CHECK(d.checkpoint_interval_ms == 10000);
  CHECK(d.retry_backoff_ms == 5000);
  CHECK(d.retry_backoff_max_ms == 600000);
  CHECK(d.drain_timeout_ms == 30000);
  CHECK(d.stall_timeout_ms == 600000);
  CHECK(d.busy_timeout_ms == 5000);
  CHECK(d.synchronous == "full");
  CHECK(d.integrity_check == "quick");

  Config c = parse_config(R"(
lease_ms: 1500
checkpoint_tokens: 0
checkpoint_interval_ms: 250
retry_backoff_ms: 100
retry_backoff_max_ms: 1000
drain_timeout_ms: 2000
stall_timeout_ms: 5000
busy_timeout_ms: 200
synchronous: normal
integrity_check: full
)",
                          "/x/c.yaml");
  CHECK(c.lease_ms == 1500);
  CHECK(c.checkpoint_tokens == 0);
  CHECK(c.checkpoint_interval_ms == 250);
  CHECK(c.retry_backoff_ms == 100);
  CHECK(c.retry_backoff_max_ms == 1000);
  CHECK(c.drain_timeout_ms == 2000);
  CHECK(c.stall_timeout_ms == 5000);
  CHECK(c.busy_timeout_ms == 200);
  CHECK(c.synchronous == "normal");
  CHECK(c.integrity_check == "full");

  CHECK(contains(error_for("lease_ms: 10\n"), "lease_ms = 10 is out of range: allowed 300..86400000"));
  CHECK(contains(error_for("checkpoint_tokens: -1\n"), "checkpoint_tokens = -1 is out of range"));
  CHECK(contains(error_for("synchronous: off\n"), "synchronous 'off' is not one of: full, normal"));
  CHECK(contains(error_for("integrity_check: yes\n"), "integrity_check 'yes' is not one of: quick, full, off"));
  CHECK(contains(error_for("\nretry_backoff_ms: soon\n"), ":2: retry_backoff_ms must be an integer, got 'soon'"));
}

TEST_CASE("changed_keys names what a reload changes; the table says what applies at run time") {
  Config a = parse_config("models:\n  tiny: t.gguf\nlog_level: info\n", "/x/c.yaml");
  Config b =
      parse_config("models:\n  tiny: t2.gguf\nlog_level: debug\ndatabase: other.db\nlease_ms: 9000\n", "/x/c.yaml");
  CHECK(changed_keys(a, a).empty());
  CHECK(changed_keys(a, b) == std::vector<std::string>{"database", "models", "log_level", "lease_ms"});
  for (const std::string key :
       {"models", "threads", "context", "log_level", "poll_interval_ms", "lease_ms", "checkpoint_tokens",
        "checkpoint_interval_ms", "retry_backoff_ms", "retry_backoff_max_ms", "drain_timeout_ms", "stall_timeout_ms"}) {
    CHECK_MESSAGE(is_reloadable(key), key);
  }
  for (const std::string key : {"database", "worker_id", "busy_timeout_ms", "synchronous", "integrity_check"}) {
    CHECK_FALSE_MESSAGE(is_reloadable(key), key);
  }
  CHECK_FALSE(is_reloadable("no_such_key"));
}

TEST_CASE("worker id: the configured one, else hostname:pid") {
  Config c;
  const std::string id = effective_worker_id(c);
  CHECK(contains(id, ":" + std::to_string(getpid())));
  CHECK(id.size() > std::to_string(getpid()).size() + 1);
  c.worker_id = "night-1";
  CHECK(effective_worker_id(c) == "night-1");
}

TEST_CASE("database path: --db, else the config, else $NIGHTSHIFT_DB, else ./nightshift.db") {
  const char* saved = std::getenv(kDatabaseEnv);
  const std::string saved_value = saved != nullptr ? saved : "";
  Config with_db;
  with_db.database = "/var/lib/nightshift/q.db";
  Config without_db;

  setenv(kDatabaseEnv, "/env/q.db", 1);
  CHECK(resolve_database_path("/cli/q.db", &with_db) == "/cli/q.db");
  CHECK(resolve_database_path("", &with_db) == "/var/lib/nightshift/q.db");
  CHECK(resolve_database_path("", &without_db) == "/env/q.db");
  CHECK(resolve_database_path("", nullptr) == "/env/q.db");
  unsetenv(kDatabaseEnv);
  CHECK(resolve_database_path("", nullptr) == "nightshift.db");
  CHECK(resolve_database_path("", &without_db) == "nightshift.db");

  if (saved != nullptr) setenv(kDatabaseEnv, saved_value.c_str(), 1);
}

TEST_CASE("log levels parse; unknown ones list the valid names") {
  CHECK(parse_log_level("debug") == spdlog::level::debug);
  CHECK(parse_log_level("warn") == spdlog::level::warn);
  CHECK(parse_log_level("error") == spdlog::level::err);
  CHECK(parse_log_level("off") == spdlog::level::off);
  try {
    parse_log_level("verbose");
    FAIL("accepted an unknown level");
  } catch (const ns::Error& e) {
    CHECK(contains(e.what(), "trace, debug, info, warn, error, critical, off"));
  }
}

TEST_CASE("memory_budget takes human sizes and io_mode names a read path") {
  Config c = parse_config("memory_budget: 2500MiB\nio_mode: pread\n", "/etc/nightshift/config.yaml");
  CHECK(c.engine.memory_budget == 2500ull << 20);
  CHECK(c.engine.io_mode == ns::IoMode::pread);
  CHECK(parse_config("memory_budget: 8GiB\n", "/x.yaml").engine.memory_budget == 8ull << 30);
  CHECK(parse_config("", "/x.yaml").engine.memory_budget == 0);
  CHECK(error_for("memory_budget: lots\n").find("memory_budget") != std::string::npos);
  // A bare number was bytes and failed only at the model's load (#31).
  const std::string bare = error_for("memory_budget: 2048\n");
  CHECK_MESSAGE(contains(bare, "memory_budget: 2048 has no unit (it would be 2048 bytes): write 2048MiB or 2048GiB"),
                bare);
  CHECK(parse_config("memory_budget: 0\n", "/x.yaml").engine.memory_budget == 0);
  CHECK(error_for("io_mode: floppy\n").find("uring, pread, mmap") != std::string::npos);
}

TEST_CASE("cpu_features: auto by default, a path this CPU has, else an error naming its flags") {
  using ns::kernels::Isa;
  CHECK(parse_config("", "/x.yaml").cpu_features == "auto");
  CHECK(parse_config("cpu_features: scalar\n", "/x.yaml").cpu_features == "scalar");
  const std::string bad = error_for("threads: 1\ncpu_features: avx9\n");
  CHECK_MESSAGE(contains(bad, "/etc/nightshift/config.yaml:2:"), bad);
  CHECK_MESSAGE(contains(bad, "auto, avx512, avx2, scalar"), bad);
  for (const Isa isa : {Isa::avx2, Isa::avx512}) {
    const std::string yaml = std::string("cpu_features: ") + ns::kernels::isa_name(isa) + "\n";
    if (isa <= ns::kernels::detected_isa()) {
      CHECK(parse_config(yaml, "/x.yaml").cpu_features == ns::kernels::isa_name(isa));
    } else {
      const std::string msg = error_for(yaml);
      CHECK_MESSAGE(contains(msg, "this CPU has: " + ns::kernels::cpu_feature_summary()), msg);
    }
  }
  CHECK(is_reloadable("cpu_features"));
}

TEST_CASE("repack_experts: true by default, a boolean, applied at the next model load") {
  CHECK(parse_config("", "/x.yaml").engine.repack_experts);
  CHECK_FALSE(parse_config("repack_experts: false\n", "/x.yaml").engine.repack_experts);
  CHECK(parse_config("repack_experts: true\n", "/x.yaml").engine.repack_experts);
  const std::string bad = error_for("threads: 1\nrepack_experts: maybe\n");
  CHECK_MESSAGE(contains(bad, "/etc/nightshift/config.yaml:2:"), bad);
  CHECK_MESSAGE(contains(bad, "repack_experts must be true or false, got 'maybe'"), bad);
  CHECK(is_reloadable("repack_experts"));
  CHECK_FALSE(worker_options_from(parse_config("repack_experts: false\n", "/x.yaml")).engine.repack_experts);
}

TEST_CASE("preload_experts: true by default, a boolean, applied at the next model load") {
  CHECK(parse_config("", "/x.yaml").engine.preload_experts);
  CHECK_FALSE(parse_config("preload_experts: false\n", "/x.yaml").engine.preload_experts);
  const std::string bad = error_for("threads: 1\npreload_experts: sometimes\n");
  CHECK_MESSAGE(contains(bad, "preload_experts must be true or false, got 'sometimes'"), bad);
  CHECK(is_reloadable("preload_experts"));
  CHECK_FALSE(worker_options_from(parse_config("preload_experts: false\n", "/x.yaml")).engine.preload_experts);
  CHECK(worker_options_from(parse_config("", "/x.yaml")).engine.preload_experts);
}

TEST_CASE("a model entry may override its chat template: a family by name or a template file") {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("ns-config-chat-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  { std::ofstream(dir / "chat.jinja") << "{{ messages[0].content }}"; }
  Config c = parse_config(R"(
models:
  plain: plain.gguf
  named: {path: named.gguf, chat_template: chatml}
  filed:
    path: filed.gguf
    chat_template: chat.jinja
)",
                          (dir / "config.yaml").string());
  CHECK(c.models.at("named") == (dir / "named.gguf").string());
  CHECK(c.models.at("filed") == (dir / "filed.gguf").string());
  CHECK(c.chat_templates.count("plain") == 0);
  CHECK(c.chat_templates.at("named") == "chatml");
  CHECK(c.chat_templates.at("filed") == "{{ messages[0].content }}");
  CHECK_THROWS_WITH(
      parse_config("models:\n  m: {path: m.gguf, chat_template: no-such.jinja}\n", (dir / "c.yaml").string()),
      doctest::Contains("neither a family"));
  CHECK_THROWS_WITH(parse_config("models:\n  m: {path: m.gguf, template: chatml}\n", (dir / "c.yaml").string()),
                    doctest::Contains("models.m.template is not a field"));
  CHECK_THROWS_WITH(parse_config("models:\n  m: {chat_template: chatml}\n", (dir / "c.yaml").string()),
                    doctest::Contains("models.m has no path"));
  std::filesystem::remove_all(dir);
}
