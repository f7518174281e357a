// The engine's one options path (engine/api/engine_options.h): its table is the
// daemon's engine keys (defaults, docs, reload), every row is compared by
// operator== (so a changed option reloads the model), the closed sets parse
// once with errors naming the key, and sizes need a unit.
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <type_traits>

#include "daemon/lib/config.h"
#include "daemon/lib/job_run.h"
#include "engine/api/engine_options.h"
#include "common/error.h"

using namespace ns;
using namespace ns::daemon;

namespace {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::string error_for(const std::string& yaml) {
  try {
    parse_config(yaml, "/etc/nightshift/config.yaml");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A different value of the same option.
template <class T>
void change(T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    v = !v;
  } else if constexpr (std::is_same_v<T, uint64_t>) {
    v += uint64_t{1} << 20;
  } else if constexpr (std::is_integral_v<T>) {
    v += 1;
  } else if constexpr (std::is_same_v<T, std::string>) {
    v += "x";
  } else {
    v = static_cast<typename T::Value>((static_cast<size_t>(v.value) + 1) % T::kNames.size());
  }
}

}  // namespace

TEST_CASE("the daemon's engine keys are the rows of the engine's table, with the daemon's defaults") {
  std::map<std::string, ConfigOption> keys;
  for (const ConfigOption& o : config_options()) keys.emplace(o.name, o);
  const Config defaults = default_config();
  int config_rows = 0;
  EngineOptions::for_each(defaults.engine, [&](const auto& value, const OptionInfo& info) {
    const auto it = keys.find(info.name);
    if (!info.config_key) {
      CHECK_MESSAGE(it == keys.end(), info.name << " is not a config key, but the config accepts it");
      return;
    }
    ++config_rows;
    REQUIRE_MESSAGE(it != keys.end(), info.name << " is a config key of the engine's table, not of the config's");
    CHECK(std::string(it->second.default_value) == option_text(value));
    CHECK(std::string(it->second.doc).starts_with(info.doc));
    CHECK(it->second.reloadable);  // applied at the next model load
  });
  CHECK(config_rows == 9);
  // The daemon's two defaults that differ from a bare engine's.
  CHECK(defaults.engine.max_sequences == 8);
  CHECK(defaults.engine.prefix_cache == 2);
  CHECK(EngineOptions{}.max_sequences == 1);
  CHECK(EngineOptions{}.prefix_cache == 0);
}

TEST_CASE("every option takes part in operator==: changing any one reloads the model") {
  const EngineOptions base;
  int rows = 0;
  EngineOptions::for_each(base, [&](const auto&, const OptionInfo& info) {
    ++rows;
    EngineOptions changed = base;
    EngineOptions::for_each(changed, [&](auto& member, const OptionInfo& i) {
      if (std::string(i.name) == info.name) change(member);
    });
    CHECK_MESSAGE(!(changed == base), info.name);
    CHECK_MESSAGE(engine_option_text(changed, info.name) != engine_option_text(base, info.name), info.name);
  });
  CHECK(rows == 15);
  CHECK(engine_option_text(base, "no_such_option").empty());

  // Through the daemon: a reload that changes io_mode names it, and the worker's options differ.
  const Config a = parse_config("io_mode: uring\n", "/x.yaml"), b = parse_config("io_mode: pread\n", "/x.yaml");
  CHECK(changed_keys(a, b) == std::vector<std::string>{"io_mode"});
  CHECK(worker_options_from(a).engine != worker_options_from(b).engine);
  CHECK(worker_options_from(a).engine == worker_options_from(parse_config("", "/x.yaml")).engine);
  CHECK(changed_keys(parse_config("memory_budget: 8GiB\n", "/x.yaml"),
                     parse_config("memory_budget: 8192MiB\n", "/x.yaml"))
            .empty());  // the same bytes
}

TEST_CASE("io_mode and cache_policy: enums parsed once, errors naming the key and the accepted names") {
  CHECK(IoMode("pread") == IoMode::pread);
  CHECK(IoMode::parse("mmap") == IoModeNames::mmap);
  CHECK(std::string(IoMode(IoMode::mmap).name()) == "mmap");
  CHECK(CachePolicy(std::string("lru")) == CachePolicy::lru);
  CHECK_THROWS_WITH_AS(IoMode("disk"), "io_mode 'disk' is not one of: uring, pread, mmap", Error);
  CHECK_THROWS_WITH_AS(CachePolicy("arc"), "cache_policy 'arc' is not one of: lru, lfu", Error);
  const std::string e = error_for("threads: 2\nio_mode: disk\n");
  CHECK_MESSAGE(contains(e, "/etc/nightshift/config.yaml:2: io_mode 'disk' is not one of: uring, pread, mmap"), e);
  CHECK(parse_config("io_mode: mmap\n", "/x.yaml").engine.io_mode == IoMode::mmap);
}

TEST_CASE("sizes: a number with a unit, or 0; the text an option shows reads back to its bytes") {
  CHECK(parse_option_bytes("memory_budget", "8GiB") == uint64_t{8} << 30);
  CHECK(parse_option_bytes("memory_budget", "0") == 0);
  CHECK_THROWS_WITH_AS(parse_option_bytes("--memory-budget", "2048"),
                       doctest::Contains("--memory-budget: 2048 has no unit (it would be 2048 bytes)"), Error);
  CHECK_THROWS_WITH_AS(parse_option_bytes("memory_budget", "8 parsecs"), doctest::Contains("memory_budget: "), Error);
  for (const uint64_t b : {uint64_t{0}, uint64_t{1} << 20, uint64_t{2500} << 20, uint64_t{3} << 30, uint64_t{12345}})
    CHECK_MESSAGE(parse_option_bytes("x", option_text(b)) == b, option_text(b));
  CHECK(option_text(uint64_t{8} << 30) == "8GiB");
  CHECK(parse_config("memory_budget: 2500MiB\n", "/x.yaml").engine.memory_budget == uint64_t{2500} << 20);
}

TEST_CASE("a config key the engine's table lacks is still refused with a suggestion") {
  const std::string e = error_for("io_mod: pread\n");
  CHECK_MESSAGE(contains(e, "unknown key 'io_mod'; did you mean 'io_mode'?"), e);
  const std::string t = error_for("max_batch_tokens: 64\n");  // an engine option, but not a config key
  CHECK_MESSAGE(contains(t, "unknown key 'max_batch_tokens'"), t);
  const std::string r = error_for("max_batch: 0\n");
  CHECK_MESSAGE(contains(r, "max_batch = 0 is out of range: allowed 1..1024"), r);
}
