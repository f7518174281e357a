// The bad-input matrix, as the daemon meets it: every kind of broken job ends
// with its own error kind and a message that names the problem, at once (not
// retried), and the good jobs queued before and after it still run. Rows are
// written the way a hand edit or an old client would, past submit()'s checks.
// Corrupt models are made from a real generated GGUF.
#include <doctest/doctest.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "daemon/lib/worker.h"
#include "jobs/queue.h"
#include "jobs/sqlite_db.h"
#include "jobs/sqlite_queue.h"
#include "tests/unit/daemon/generated_models.h"
#include "tests/unit/jobs/fast_queue.h"
#include "tests/unit/jobs/temp_dir.h"

using namespace ns;
using jobs::JobState;

namespace {

using test::read_file;
using test::write_file;

// The GGUF with the type id of tensor `name` replaced by `type_id`: after the
// name come n_dims (u32), n_dims dims (u64 each), then the type (u32).
std::string with_tensor_type(std::string gguf, const std::string& name, uint32_t type_id) {
  const size_t at = gguf.find(name);
  REQUIRE(at != std::string::npos);
  size_t p = at + name.size();
  uint32_t n_dims = 0;
  std::memcpy(&n_dims, gguf.data() + p, 4);
  p += 4 + 8 * static_cast<size_t>(n_dims);
  std::memcpy(gguf.data() + p, &type_id, 4);
  return gguf;
}

struct Case {
  int64_t id;
  const char* what;
  const char* kind;
  std::string needle;  // in the error message
};

}  // namespace

TEST_CASE("bad input: each broken job fails at once with its own error; the other jobs are unaffected") {
  const auto model = test::small_model();
  if (!model) return;
  spdlog::set_level(spdlog::level::off);
  test::TempDir dir;
  const std::string db_path = dir.file("q.db");
  auto queue = jobs::open_sqlite_queue(db_path, test::kFastCommits);

  // Broken model files, all made from the good one.
  const std::string good = read_file(*model);
  REQUIRE(good.size() > 100'000);
  std::string random_bytes(good.size(), '\0');
  std::mt19937 rng(7);
  for (char& c : random_bytes) c = static_cast<char>(rng());
  const std::map<std::string, std::string> files = {
      {"random", random_bytes},
      {"header", good.substr(0, 20)},                    // cut inside the header
      {"past_eof", good.substr(0, good.size() - 5000)},  // the last tensor runs past the end
      {"bad_type", with_tensor_type(good, "output_norm.weight", 99)},
      {"text", "this is a README, not a model\n"},
  };
  daemon::WorkerOptions options;
  options.worker_id = "w";
  options.engine.threads = 1;
  options.engine.context = 64;
  options.retry_backoff = {0, 0};
  options.models["good"] = *model;
  for (const auto& [name, bytes] : files) {
    write_file(dir.file(name + ".gguf"), bytes);
    options.models[name] = dir.file(name + ".gguf");
  }

  auto submit = [&](const std::string& model_name, const std::string& prompt = "A quiet night") {
    return queue->submit(test::generation_spec(model_name, prompt, 4)).id;
  };
  // As a hand edit or an older client would write them, past submit()'s checks.
  jobs::sqlite::Db raw(db_path);
  auto edit = [&](int64_t id, const std::string& set) {
    raw.exec("UPDATE jobs SET " + set + " WHERE id = " + std::to_string(id));
  };

  const int64_t first = submit("good");
  std::vector<Case> cases = {
      {submit("random"), "random bytes", "bad_model", "missing GGUF magic"},
      {submit("bad_type"), "unknown tensor type", "bad_model", "unknown type id 99"},
      {submit("text"), "a text file named .gguf", "bad_model", "text.gguf"},
      {submit("good", std::string(400, 'w') + " and more words than 64 tokens hold " + std::string(400, 'x')),
       "prompt longer than the context", "invalid_input", "but the context holds 64"},
  };
  // A good job whose row is then edited with `set`.
  auto edited = [&](const std::string& set) {
    const int64_t id = submit("good");
    edit(id, set);
    return id;
  };
  // "cafe " + a cut-off 2-byte sequence
  cases.push_back({edited("prompt = CAST(X'6361666520C3' AS TEXT)"), "invalid UTF-8 prompt", "invalid_input",
                   "not valid UTF-8 (bad byte sequence at byte 5)"});
  cases.push_back({edited("prompt = printf('%.*c', " + std::to_string(jobs::kMaxPromptBytes + 1) + ", 'x')"),
                   "oversized prompt", "invalid_input", "at most 8388608 bytes"});
  cases.push_back({edited("temperature = 99"), "temperature out of range", "invalid_input", "temperature"});
  cases.push_back({edited("top_p = 0"), "top_p = 0", "invalid_input", "top_p"});
  cases.push_back({edited("max_tokens = 0"), "max_tokens = 0", "invalid_input", "max_tokens"});
  cases.push_back({edited("repeat_penalty = -1"), "negative repeat_penalty", "invalid_input", "repeat_penalty"});
  // Not bad input: a file shorter than its header says (a copy in progress): held, tried again later (#30 E).
  const std::vector<std::pair<int64_t, std::string>> cut = {{submit("header"), "unexpected end of file"},
                                                            {submit("past_eof"), "truncated download?"}};
  const int64_t last = submit("good");
  // Nor this: the daemon's config lacks the model. The job stays queued.
  const int64_t unknown = submit("no_such_model");

  std::atomic<bool> stop{false};
  daemon::Worker worker(*queue, options, stop);
  CHECK(worker.run(/*drain=*/true) == static_cast<int>(cases.size()) + 2);  // each claimed once: nothing retried

  for (const Case& c : cases) {
    CAPTURE(c.what);
    const jobs::Job j = *queue->get(c.id);
    CHECK(j.state == JobState::failed);
    CHECK(j.attempts == 1);
    CHECK(j.error_kind == c.kind);
    CHECK_MESSAGE(j.error.find(c.needle) != std::string::npos, j.error);
    CHECK_FALSE(j.result);
  }
  for (int64_t id : {first, last}) {
    const jobs::Job j = *queue->get(id);
    CHECK(j.state == JobState::done);
    REQUIRE(j.result);
    CHECK(j.result->completion_tokens == 4);
  }
  CHECK(worker.loaded_model() == "good");
  const jobs::QueueCounts counts = queue->counts();
  CHECK(counts.done == 2);
  CHECK(counts.failed == static_cast<int64_t>(cases.size()));
  CHECK(counts.running + counts.dead == 0);
  const jobs::Job u = *queue->get(unknown);
  CHECK(u.state == JobState::queued);
  CHECK(u.attempts == 0);
  for (const auto& [id, needle] : cut) {
    const jobs::Job j = *queue->get(id);
    CHECK(j.state == JobState::queued);
    CHECK(j.attempts == 0);
    CHECK_MESSAGE(queue->attempts(id).back().error.find("incomplete GGUF") != std::string::npos,
                  queue->attempts(id).back().error);
    CHECK_MESSAGE(queue->attempts(id).back().error.find(needle) != std::string::npos, queue->attempts(id).back().error);
  }
  CHECK(counts.queued == 1 + static_cast<int64_t>(cut.size()));
}
