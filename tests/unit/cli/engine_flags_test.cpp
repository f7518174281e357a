// The engine's flags (daemon/cli/engine_flags.h): named, documented and
// parsed as the rows of the engine's table say, as the config parses them.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "daemon/cli/engine_flags.h"

using namespace ns;

namespace {

struct Command {
  CLI::App app{"test"};
  EngineOptions o;
  Command() {
    cli::add_engine_flag(&app, o, "threads", "-t");
    cli::add_engine_flag(&app, o, "context", "-c");
    cli::add_engine_flag(&app, o, "memory_budget");
    cli::add_engine_flag(&app, o, "io_mode");
    cli::add_engine_flag(&app, o, "repack_experts");
  }
};

}  // namespace

TEST_CASE("engine flags: --kebab-case of the key, the row's doc, the row's parsing") {
  Command c;
  c.app.parse("-t 3 -c 512 --memory-budget 2GiB --io-mode pread --repack-experts off", false);
  CHECK(c.o.threads == 3);
  CHECK(c.o.context == 512);
  CHECK(c.o.memory_budget == uint64_t{2} << 30);
  CHECK(c.o.io_mode == IoMode::pread);
  CHECK_FALSE(c.o.repack_experts);
  const std::string help = c.app.help();
  EngineOptions::for_each(c.o, [&](const auto&, const OptionInfo& info) {
    if (std::string(info.name) == "threads" || std::string(info.name) == "io_mode")
      CHECK_MESSAGE(help.find(info.doc) != std::string::npos, help);
  });
  CHECK(help.find("--memory-budget") != std::string::npos);
}

TEST_CASE("engine flags: defaults stay; bad values are refused as the config refuses them") {
  Command fresh;
  fresh.app.parse("", false);
  CHECK(fresh.o == EngineOptions{});
  Command bare;
  CHECK_THROWS_WITH_AS(bare.app.parse("--memory-budget 2048", false), doctest::Contains("2048 has no unit"),
                       CLI::ValidationError);
  Command mode;
  CHECK_THROWS_AS(mode.app.parse("--io-mode disk", false), CLI::ValidationError);
  Command range;
  CHECK_THROWS_AS(range.app.parse("--threads -1", false), CLI::ParseError);
  CLI::App app;
  EngineOptions o;
  CHECK_THROWS_AS(cli::add_engine_flag(&app, o, "no_such_option"), std::logic_error);
}

TEST_CASE("engine flags over a config (run-batch): only the flags given override its values") {
  CLI::App app{"test"};
  cli::EngineOverrides flags{.flags = {.max_sequences = 8}};
  flags.add(&app, "threads", "-t");
  flags.add(&app, "max_batch");
  flags.add(&app, "memory_budget");
  app.parse("-t 3 --memory-budget 2GiB", false);
  CHECK(flags.given() == std::vector<std::string>{"threads", "memory_budget"});
  EngineOptions config{.threads = 6, .max_sequences = 32, .memory_budget = uint64_t{8} << 30};
  for (const std::string& name : flags.given()) CHECK(copy_engine_option(config, flags.flags, name));
  CHECK(config.threads == 3);
  CHECK(config.max_sequences == 32);  // not given: the config's, not the flag's default
  CHECK(config.memory_budget == uint64_t{2} << 30);
  CHECK_FALSE(copy_engine_option(config, flags.flags, "no_such_option"));
}
