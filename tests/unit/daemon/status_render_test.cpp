// The pure renderings of a status snapshot a server serves: the Prometheus
// text (daemon/lib/metrics_text.h) and the status page (daemon/lib/status_page.h).
#include <doctest/doctest.h>

#include <string>

#include "daemon/lib/metrics_text.h"
#include "daemon/lib/progress_format.h"
#include "daemon/lib/status_page.h"

using namespace ns;
using namespace ns::daemon;

namespace {

constexpr int64_t kNow = 1'800'000'000'000;

size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++n;
  return n;
}

StatusSnapshot snapshot() {
  StatusSnapshot s;
  s.now_ms = kNow;
  jobs::ModelTotals m;
  m.model = "k\"2\\x\ny";
  m.jobs.done = 3;
  m.jobs.queued = 2;
  m.results = 3;
  m.completion_tokens = 400;
  m.prompt_tokens = 30;
  m.bytes_read = 8'000'000'000;
  m.queue_wait_ms = 4500;
  m.decode_share_ms = 2000;
  m.io_wait_ms = 1000;
  m.compute_ms = 3000;
  m.cache_hit_rate_x_tokens = 0.25 * 400;
  m.batch_size_x_tokens = 3.5 * 400;
  s.models.push_back(m);
  jobs::WorkerInfo w;
  w.id = "host:7";
  w.host = "host";
  w.started_ms = kNow - 3'600'000;
  w.heartbeat_ms = kNow - 2000;
  w.jobs = {5, 6};
  s.workers.push_back(w);
  for (int64_t id : {5, 6}) {
    jobs::Job j;
    j.id = id;
    j.state = jobs::JobState::running;
    j.worker = "host:7";
    j.spec.model = "tiny";
    j.spec.batch = "<b>night</b> & 'day'";
    j.spec.sampling.max_tokens = 100;
    j.progress = {.prompt_tokens = 10, .prefilled = 10, .generated = 40, .tok_s = 2.5, .updated_ms = kNow - 100};
    s.running.push_back(j);
  }
  jobs::BatchSummary b;
  b.name = "<b>night</b> & 'day'";
  b.created_ms = kNow - 600'000;
  b.counts.done = 3;
  b.counts.running = 2;
  b.counts.queued = 5;
  s.batches.push_back(b);
  s.history_ms = 3'600'000;
  s.bucket_ms = 600'000;
  s.history = {{kNow / 600'000 * 600'000 - 1'200'000, 2, 1200, 100}, {kNow / 600'000 * 600'000, 1, 600, 50}};
  jobs::Job f;
  f.id = 9;
  f.state = jobs::JobState::failed;
  f.spec.model = "tiny";
  f.finished_ms = kNow - 5000;
  f.error_kind = "invalid_input";
  f.error = "prompt <too> long";
  s.failures.push_back(f);
  return s;
}

}  // namespace

TEST_CASE("label values are escaped as the text format asks, invalid UTF-8 replaced") {
  CHECK(escape_label_value("plain") == "plain");
  CHECK(escape_label_value("a\"b\\c\nd") == "a\\\"b\\\\c\\nd");
  CHECK(escape_label_value("bad\xff") == "bad\xEF\xBF\xBD");
}

TEST_CASE("metrics: every family once with HELP and TYPE, values from the sums") {
  const std::string text = metrics_text(snapshot());
  CHECK(text.find("nightshift_jobs{model=\"k\\\"2\\\\x\\ny\",state=\"done\"} 3\n") != std::string::npos);
  CHECK(text.find("nightshift_jobs{model=\"k\\\"2\\\\x\\ny\",state=\"queued\"} 2\n") != std::string::npos);
  CHECK(text.find("nightshift_tokens_generated_total{model=\"k\\\"2\\\\x\\ny\"} 400\n") != std::string::npos);
  CHECK(text.find("nightshift_decode_tokens_per_second{model=\"k\\\"2\\\\x\\ny\"} 200\n") != std::string::npos);
  CHECK(text.find("nightshift_io_wait_ratio{model=\"k\\\"2\\\\x\\ny\"} 0.25\n") != std::string::npos);
  CHECK(text.find("nightshift_read_bytes_per_second{model=\"k\\\"2\\\\x\\ny\"} 2000000000\n") != std::string::npos);
  CHECK(text.find("nightshift_expert_cache_hit_ratio{model=\"k\\\"2\\\\x\\ny\"} 0.25\n") != std::string::npos);
  CHECK(text.find("nightshift_batch_size_mean{model=\"k\\\"2\\\\x\\ny\"} 3.5\n") != std::string::npos);
  CHECK(text.find("nightshift_queue_wait_seconds_sum{model=\"k\\\"2\\\\x\\ny\"} 4.5\n") != std::string::npos);
  CHECK(text.find("nightshift_queue_wait_seconds_count{model=\"k\\\"2\\\\x\\ny\"} 3\n") != std::string::npos);
  CHECK(text.find("nightshift_tokens_per_second{worker=\"host:7\"} 5\n") != std::string::npos);
  CHECK(text.find("nightshift_batch_size{worker=\"host:7\"} 2\n") != std::string::npos);
  CHECK(text.find("nightshift_worker_up{worker=\"host:7\"} 1\n") != std::string::npos);
  for (const char* family : {"nightshift_jobs", "nightshift_tokens_generated_total", "nightshift_queue_wait_seconds",
                             "nightshift_worker_up", "nightshift_read_bytes_total"}) {
    CHECK(count_of(text, std::string("# HELP ") + family + " ") == 1);
    CHECK(count_of(text, std::string("# TYPE ") + family + " ") == 1);
  }
  CHECK(text.find("# TYPE nightshift_queue_wait_seconds summary\n") != std::string::npos);
  CHECK(text.back() == '\n');
}

TEST_CASE("metrics of an empty queue: the families' HELP and TYPE, no ratio divided by zero") {
  StatusSnapshot s;
  s.now_ms = kNow;
  jobs::ModelTotals idle;
  idle.model = "idle";
  idle.jobs.queued = 1;
  s.models.push_back(idle);
  const std::string text = metrics_text(s);
  CHECK(text.find("# TYPE nightshift_io_wait_ratio gauge\n") != std::string::npos);
  CHECK(text.find("nightshift_io_wait_ratio{") == std::string::npos);
  CHECK(text.find("NaN") == std::string::npos);
  CHECK(text.find("nightshift_tokens_generated_total{model=\"idle\"} 0\n") != std::string::npos);
}

TEST_CASE("a stopped or silent daemon is not up and shows no live figures") {
  StatusSnapshot s = snapshot();
  s.workers[0].heartbeat_ms = kNow - kWorkerSilentMs - 1;
  const std::string text = metrics_text(s);
  CHECK(text.find("nightshift_worker_up{worker=\"host:7\"} 0\n") != std::string::npos);
  CHECK(text.find("nightshift_batch_size{worker=") == std::string::npos);
}

TEST_CASE("html_escape: markup, quotes, invalid UTF-8 and controls") {
  CHECK(html_escape("<a href=\"x\">Tom & 'Jerry'</a>") ==
        "&lt;a href=&quot;x&quot;&gt;Tom &amp; &#39;Jerry&#39;&lt;/a&gt;");
  CHECK(html_escape("ok\xff") == "ok\xEF\xBF\xBD");
  CHECK(html_escape(std::string("a\x1b[31mb")) == "a\xEF\xBF\xBD[31mb");
  CHECK(html_escape("line\nnext") == "line\nnext");
}

TEST_CASE("the status page: escaped names, the batch's progress element, the chart, daemons, failures") {
  const std::string page = status_page_html(snapshot());
  CHECK(page.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(page.find("<b>") == std::string::npos);
  CHECK(page.find("<script") == std::string::npos);
  const std::string name = "&lt;b&gt;night&lt;/b&gt; &amp; &#39;day&#39;";
  CHECK(page.find("<progress class=\"batch-progress\" data-batch=\"" + name +
                  "\" data-finished=\"3\" data-total=\"10\" value=\"3\" max=\"10\">") != std::string::npos);
  CHECK(page.find("5.00 tok/s") != std::string::npos);  // the batch's two running jobs
  CHECK(page.find("ETA") != std::string::npos);
  CHECK(page.find("<td>-</td>") != std::string::npos);  // no job started: no rate, no batch ETA yet
  CHECK(page.find("<svg id=\"throughput-chart\"") != std::string::npos);
  CHECK(count_of(page, "<rect class=\"bar\"") == 2);
  CHECK(page.find("data-tok-s=\"2.000\"") != std::string::npos);  // 1200 tokens in 10 minutes
  CHECK(page.find("data-worker=\"host:7\"") != std::string::npos);
  CHECK(page.find("invalid_input: prompt &lt;too&gt; long") != std::string::npos);
  CHECK(page.find("<meta http-equiv=\"refresh\" content=\"10\">") != std::string::npos);
  CHECK(status_page_html(snapshot(), {.refresh_s = 0}).find("http-equiv") == std::string::npos);
  CHECK(page.find("http://") == page.find("http://www.w3.org/2000/svg"));  // nothing fetched from elsewhere
}

// #31: the page's batch ETA was the lines' finishing rate or the running jobs' ETAs to max_tokens; it is now the
// batch's (jobs/batch_eta.h), its queued jobs included.
TEST_CASE("a batch's ETA is the batch's, its queued jobs included") {
  StatusSnapshot s = snapshot();
  jobs::BatchProgress& p = s.batches[0].progress;
  p = {.first_started_ms = kNow - 600'000,
       .done = 3,
       .done_tokens = 300,
       .result_tokens = 300,
       .running = 2,
       .running_generated = 80,
       .running_max_tokens = 200,
       .queued = 5,
       .queued_max_tokens = 500};
  const std::string page = status_page_html(s);
  // 5 x 100 queued + 2 x 100 - 80 running, at 380 tokens in 600 s.
  CHECK(page.find("<td>" + format_duration(620 / (380 / 600.0)) + "</td>") != std::string::npos);
}
