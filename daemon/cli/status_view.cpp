#include "daemon/cli/status_view.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <numeric>
#include <sstream>

#include "daemon/cli/batch_export.h"
#include "daemon/lib/progress_format.h"
#include "daemon/lib/job_format.h"
#include "jobs/time_format.h"
#include "common/utf8.h"

namespace ns::cli {
// The progress pieces (daemon/lib/progress_format.h).
using daemon::ago;
using daemon::eta_seconds;
using daemon::format_duration;
using daemon::format_rate;
using daemon::progress_bar;
namespace {

using daemon::kWorkerSilentMs;
// Stopped daemons stay listed this long, then drop out of the report.
constexpr int64_t kStoppedShownMs = 24 * 3600 * 1000;

bool in_prefill(const jobs::Job& job) {
  const jobs::JobProgress& p = job.progress;
  return p.updated_ms != 0 && p.generated == 0 && p.prompt_tokens > 0 && p.prefilled < p.prompt_tokens;
}

// Text from a job (a prompt, a random model's output) shown on one terminal
// line: invalid UTF-8 becomes U+FFFD, line breaks and tabs become spaces and
// every other control (C0, DEL, C1 such as CSI U+009B) is escaped by the one
// sanitiser (daemon::escape_controls), so it can neither break the layout nor
// drive the terminal; cut to about max_chars bytes on a character boundary.
std::string one_line(std::string_view text, size_t max_chars) {
  std::string flat = to_valid_utf8(text);
  for (char& c : flat) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  std::string out = daemon::escape_controls(flat, false);
  if (out.size() > max_chars) {
    size_t cut = max_chars - 3;
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
    out = out.substr(0, cut) + "...";
  }
  return out;
}

// "reviews-0412 req-7", "notes notes/one.md@3f2a..." or the start of the prompt.
std::string job_label(const jobs::Job& job, size_t max_chars) {
  if (!job.spec.batch.empty()) {
    return one_line(job.spec.batch + (job.spec.custom_id.empty() ? "" : " " + job.spec.custom_id), max_chars);
  }
  const std::string& text = job.spec.is_chat() ? job.spec.messages : job.spec.prompt;
  return "\"" + one_line(text, max_chars - 2) + "\"";
}

std::string counts_text(const jobs::QueueCounts& c) {
  std::string s = std::to_string(c.queued) + " queued";
  if (c.held > 0) s += " (" + std::to_string(c.held) + " held)";
  if (c.retry_waiting > 0) s += " (" + std::to_string(c.retry_waiting) + " waiting to retry)";
  s += ", " + std::to_string(c.running) + " running, " + std::to_string(c.done) + " done, " + std::to_string(c.failed) +
       " failed, " + std::to_string(c.cancelled) + " cancelled, " + std::to_string(c.dead) + " dead";
  return s;
}

bool shown_worker(const jobs::WorkerInfo& w, int64_t now_ms) {
  return w.stopped_ms == 0 || now_ms - w.stopped_ms < kStoppedShownMs;
}

// The seconds a running job has left: the daemon's estimate counted down to
// now; from its rate for a daemon that writes none (older versions), also
// counted down.
std::optional<double> job_eta_s(const jobs::Job& job, int64_t now_ms) {
  const jobs::JobProgress& p = job.progress;
  if (p.updated_ms == 0) return std::nullopt;
  if (auto eta = jobs::remaining_eta_s(p, now_ms)) return eta;
  if (in_prefill(job)) return std::nullopt;
  jobs::JobProgress from_rate = p;
  from_rate.eta_s = eta_seconds(p.generated, job.spec.sampling.max_tokens, p.tok_s).value_or(-1);
  return jobs::remaining_eta_s(from_rate, now_ms);
}

// Characters (not bytes) of a UTF-8 line.
size_t chars_of(const std::string& line) {
  size_t chars = 0;
  for (unsigned char c : line) chars += (c & 0xC0) != 0x80;
  return chars;
}

// `line` cut to `width` characters (UTF-8 aware), "..." marking the cut.
std::string fit(const std::string& line, int width) {
  if (chars_of(line) <= static_cast<size_t>(width)) return line;
  const size_t keep = static_cast<size_t>(std::max(width - 3, 0));
  size_t seen = 0, i = 0;
  for (; i < line.size(); ++i) {
    if ((static_cast<unsigned char>(line[i]) & 0xC0) != 0x80 && seen++ == keep) break;
  }
  return line.substr(0, i) + "...";
}

// `text`'s lines wrapped at spaces to `width` characters, continuation lines
// indented by `indent` spaces: a reason is shown whole, never cut.
std::vector<std::string> wrap(const std::string& text, int width, int indent) {
  std::vector<std::string> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::string cur;
    std::istringstream words(line);
    for (std::string w; words >> w;) {
      const std::string lead = out.empty() || !cur.empty() ? "" : std::string(static_cast<size_t>(indent), ' ');
      if (!cur.empty() && static_cast<int>(chars_of(cur) + 1 + chars_of(w)) > width) {
        out.push_back(cur);
        cur = std::string(static_cast<size_t>(indent), ' ') + w;
      } else {
        cur += (cur.empty() ? lead : " ") + w;
      }
    }
    if (!cur.empty()) out.push_back(cur);
  }
  for (std::string& l : out) l = fit(l, width);  // a word longer than the line
  return out;
}

// Held jobs of the batches the snapshot lists (the rest: jobs of no batch, or of batches not listed).
int64_t held_in_batches(const StatusSnapshot& s) {
  return std::accumulate(s.batches.begin(), s.batches.end(), int64_t{0},
                         [](int64_t n, const jobs::BatchSummary& b) { return n + b.counts.held; });
}

std::string job_ids(const std::vector<int64_t>& ids) {
  std::string s;
  for (int64_t id : ids) s += (s.empty() ? "" : " ") + std::to_string(id);
  return s;
}

}  // namespace

std::string held_text(const jobs::QueueCounts& c, const std::string& batch) {
  if (c.held == 0) return "";
  const std::string of = batch.empty() ? "" : " of batch " + batch;
  return "held: " + std::to_string(c.held) + " job(s)" + of +
         " left queued by a daemon that cannot serve their model: " + c.held_reason +
         "\nfix the daemon's config (then reload it: SIGHUP), or re-point them: nightshift retry --batch " +
         (batch.empty() ? std::string("BATCH") : batch) + " --model NAME";
}

StatusSnapshot take_status(jobs::Queue& queue, const std::string& batch, int recent_limit, int batch_limit) {
  return daemon::take_status(queue, {.batch = batch, .recent_limit = recent_limit, .batch_limit = batch_limit});
}

std::string job_progress_text(const jobs::Job& job, int64_t now_ms) {
  const jobs::JobProgress& p = job.progress;
  if (p.updated_ms == 0) {
    return "started " + ago(now_ms, job.started_ms) + ", waiting for its first progress report";
  }
  const std::optional<double> eta = job_eta_s(job, now_ms);  // to max_tokens: an end-of-text token may come sooner
  std::string s;
  if (in_prefill(job)) {
    s = "prefill " + std::to_string(p.prefilled) + "/" + std::to_string(p.prompt_tokens) + " prompt tok";
  } else {
    s = std::to_string(p.generated) + "/" + std::to_string(job.spec.sampling.max_tokens) + " tok";
    if (p.tok_s > 0) s += ", " + format_rate(p.tok_s) + " tok/s";
  }
  if (eta) s += ", ETA " + format_duration(*eta);
  return s;
}

DaemonBatch daemon_batch(const StatusSnapshot& s, const std::string& worker_id) {
  DaemonBatch b;
  bool all_known = true;
  double last = 0;
  for (const jobs::Job& j : s.running) {
    if (j.worker != worker_id) continue;
    ++b.jobs;
    b.tok_s += j.progress.tok_s;
    if (auto eta = job_eta_s(j, s.now_ms))
      last = std::max(last, *eta);
    else
      all_known = false;
  }
  if (b.jobs > 0 && all_known) b.eta_s = last;
  return b;
}

std::string daemon_batch_text(const DaemonBatch& b) {
  if (b.jobs == 0) return "";
  std::string t = std::to_string(b.jobs) + (b.jobs == 1 ? " job" : " jobs");
  if (b.tok_s > 0) t += ", " + format_rate(b.tok_s) + " tok/s";
  if (b.eta_s) t += ", ETA " + format_duration(*b.eta_s);
  return t;
}

std::string worker_state_text(const jobs::WorkerInfo& w, int64_t now_ms) {
  if (w.stopped_ms != 0) return "stopped " + ago(now_ms, w.stopped_ms);
  if (now_ms - w.heartbeat_ms > kWorkerSilentMs) {
    return "silent for " + format_duration((now_ms - w.heartbeat_ms) / 1000.0) + " (crashed or hung?)";
  }
  return "up " + format_duration((now_ms - w.started_ms) / 1000.0);
}

namespace {

// One entry of a section: its line cut to the width, and the whole of it wrapped to the width (the same
// line when it fits): shown whole when the screen has the rows for it (#31: batch lines and CANNOT SERVE
// reasons were cut while rows stayed blank).
struct Item {
  std::string cut;
  std::vector<std::string> whole;
  bool expanded = false;
  int rows() const { return expanded ? static_cast<int>(whole.size()) : 1; }
};

// `line` broken at spaces into lines of at most `width` characters, its spacing kept, continuation lines
// indented by `indent` spaces; a word too long for a line is cut ("...").
std::vector<std::string> wrap_line(const std::string& line, int width, int indent) {
  std::vector<std::string> out;
  std::string rest = line;
  while (static_cast<int>(chars_of(rest)) > width) {
    size_t limit = 0;  // the byte where character number `width` starts
    for (int seen = 0; limit < rest.size(); ++limit)
      if ((static_cast<unsigned char>(rest[limit]) & 0xC0) != 0x80 && seen++ == width) break;
    const size_t lead = out.empty() ? 0 : static_cast<size_t>(indent);
    size_t cut = rest.rfind(' ', limit);
    while (cut != std::string::npos && cut > lead && rest[cut - 1] == ' ') --cut;
    if (cut == std::string::npos || cut <= lead) break;
    out.push_back(rest.substr(0, cut));
    const size_t next = rest.find_first_not_of(' ', cut);
    rest = std::string(static_cast<size_t>(indent), ' ') + (next == std::string::npos ? "" : rest.substr(next));
  }
  out.push_back(fit(rest, width));
  return out;
}

Item item_of(const std::string& line, int width) { return {fit(line, width), wrap_line(line, width, 4)}; }

// A section of the screen: its header and its entries, cut to `rows` rows
// (the header says "6 of 8 shown" when they do not all fit).
struct Section {
  std::string header;
  std::vector<Item> items;
  int rows = 0;  // given by the layout
  int wanted() const { return items.empty() ? 1 : 1 + static_cast<int>(items.size()); }
  // Entries shown in `rows`: each whole where it was given the rows for it.
  size_t shown() const {
    size_t n = 0;
    for (int left = rows - 1; n < items.size() && items[n].rows() <= left; ++n) left -= items[n].rows();
    return n;
  }
};

std::string recent_line(const jobs::Job& j, int64_t now_ms, int text_chars) {
  std::string line =
      "  job " + std::to_string(j.id) + "  " + jobs::state_name(j.state) + "  " + ago(now_ms, j.finished_ms);
  if (j.result) {
    line += "  " + std::to_string(j.result->completion_tokens) + " tok";
    if (j.result->decode_tok_s > 0) line += ", " + format_rate(j.result->decode_tok_s) + " tok/s";
  }
  if (j.state == jobs::JobState::done && j.result) {
    line += "  \"" + one_line(j.result->text, static_cast<size_t>(std::max(text_chars, 20))) + "\"";
  } else if (!j.error.empty()) {
    line += "  " + one_line((j.error_kind.empty() ? "" : j.error_kind + ": ") + j.error,
                            static_cast<size_t>(std::max(text_chars + 12, 20)));
  }
  return line;
}

std::string batch_line(const jobs::BatchSummary& b, int64_t now_ms, bool bars) {
  const jobs::QueueCounts& c = b.counts;
  const int64_t total = c.queued + c.running + c.done + c.failed + c.cancelled + c.dead;
  const int64_t finished = c.done + c.failed + c.cancelled + c.dead;
  std::string line = "  " + b.name + "  " + std::to_string(finished) + "/" + std::to_string(total) + " finished";
  if (bars) line += " " + progress_bar(finished, total, 20);
  // The batch's end, its queued jobs included (jobs/batch_eta.h): before the counts, so a narrow line keeps it.
  if (const std::optional<double> eta = jobs::batch_eta_s(b.progress, now_ms)) line += ", ETA " + format_duration(*eta);
  line += "  (" + describe_counts(c) + ")";
  line += b.finished_ms != 0 ? "  complete " + ago(now_ms, b.finished_ms) : "  created " + ago(now_ms, b.created_ms);
  return line;
}

// `watch` on a terminal: everything on width x height, one line per running
// job. Rows go first to the counts, the running jobs and the daemons (each
// with its batch's tok/s and ETA), then to the batches and the last finished.
std::string format_screen(const StatusSnapshot& s, const StatusStyle& style) {
  const int width = std::max(style.width, 40);
  Section running{"running:", {}}, daemons{"daemons:", {}}, batches{"batches:", {}}, recent{"last finished:", {}};
  // Held jobs: the reason wrapped whole (the night's one problem must not be cut), a row per entry.
  Section held{"", {}};
  const auto add_held = [&](const std::string& text) {
    for (std::string& l : wrap(text, width, 2)) held.items.push_back({l, {l}});
  };
  if (s.batch.empty()) {
    for (const jobs::BatchSummary& b : s.batches) add_held(held_text(b.counts, b.name));
    if (s.counts.held > held_in_batches(s) && held.items.empty()) add_held(held_text(s.counts, ""));
  } else {
    add_held(held_text(s.counts, s.batch));
  }
  for (const jobs::Job& j : s.running) {
    const std::string progress = job_progress_text(j, s.now_ms);
    const bool prefill = in_prefill(j);
    const std::string bar = !style.bars || j.progress.updated_ms == 0
                                ? ""
                                : (prefill ? progress_bar(j.progress.prefilled, j.progress.prompt_tokens, 10)
                                           : progress_bar(j.progress.generated, j.spec.sampling.max_tokens, 10)) +
                                      " ";
    const std::string head = "  " + std::to_string(j.id) + " ";
    const int label_room = width - static_cast<int>(head.size() + bar.size() + progress.size()) - 2;
    const std::string line = fit(
        head + (label_room >= 8 ? job_label(j, static_cast<size_t>(label_room)) + " " : "") + bar + progress, width);
    running.items.push_back({line, {line}});
  }
  // Stopped daemons (each `--drain` run leaves one, listed for a day) are one line together.
  int64_t stopped = 0, last_stop_ms = 0;
  for (const jobs::WorkerInfo& w : s.workers) {
    if (!shown_worker(w, s.now_ms) || w.stopped_ms == 0) continue;
    ++stopped;
    last_stop_ms = std::max(last_stop_ms, w.stopped_ms);
  }
  for (const jobs::WorkerInfo& w : s.workers) {
    if (!shown_worker(w, s.now_ms) || (w.stopped_ms != 0 && stopped > 1)) continue;
    // The batch's figures first: they are what the line is for on a narrow terminal.
    std::string line = "  " + fit(w.id, 24);
    if (w.stopped_ms == 0) {
      const std::string batch = daemon_batch_text(daemon_batch(s, w.id));
      if (!batch.empty()) line += "  " + batch;
    }
    // Then the rest while it fits: whole fields, the last one cut only where
    // enough of it shows, so a narrow terminal never cuts into the batch's ETA.
    std::vector<std::string> rest = {worker_state_text(w, s.now_ms)};
    if (w.stopped_ms == 0) rest.push_back(w.model.empty() ? std::string("(no model)") : w.model);
    const std::string problem =
        w.stopped_ms == 0 && !w.problem.empty() ? "CANNOT SERVE: " + one_line(w.problem, 2000) : "";
    Item it;
    // Whole: the fields that fit, then the reason wrapped on its own lines.
    std::string head = line;
    for (const std::string& field : rest) {
      const int room = width - static_cast<int>(chars_of(head)) - 2;
      if (room < static_cast<int>(chars_of(field))) break;
      head += "  " + field;
    }
    it.whole = {fit(head, width)};
    if (!problem.empty())
      for (std::string& l : wrap_line("    " + problem, width, 4)) it.whole.push_back(std::move(l));
    // Cut: everything on one line.
    if (!problem.empty()) rest.push_back(problem);
    for (const std::string& field : rest) {
      const int room = width - static_cast<int>(chars_of(line)) - 2;
      if (room >= static_cast<int>(chars_of(field))) {
        line += "  " + field;
        continue;
      }
      if (room >= 8) line += "  " + fit(field, room);
      break;
    }
    it.cut = fit(line, width);
    if (it.whole.size() == 1 && it.whole[0] != it.cut) it.whole = {it.cut};
    daemons.items.push_back(std::move(it));
  }
  if (stopped > 1) {
    const std::string line =
        "  " + std::to_string(stopped) + " stopped daemons, the last " + ago(s.now_ms, last_stop_ms);
    daemons.items.push_back({fit(line, width), {fit(line, width)}});
  }
  for (const jobs::BatchSummary& b : s.batches) batches.items.push_back(item_of(batch_line(b, s.now_ms, false), width));
  for (const jobs::Job& j : s.recent) {
    const std::string line = fit(recent_line(j, s.now_ms, width - 40), width);
    recent.items.push_back({line, {line}});
  }

  // Rows: the counts line and `watch`'s footer line are taken; then each
  // section in order of importance gets what it wants, leaving two rows
  // (header and a line) to each section after it.
  int room = std::max(style.height, 8) - 2;
  // Held lines have no header: their rows are taken first.
  if (!held.items.empty()) {
    held.rows = std::min(static_cast<int>(held.items.size()), std::max(room - 4, 1));
    room -= held.rows;
  }
  Section* order[] = {&running, &daemons, &batches, &recent};
  for (size_t i = 0; i < std::size(order); ++i) {
    int reserve = 0;
    for (size_t k = i + 1; k < std::size(order); ++k) reserve += std::min(order[k]->wanted(), 2);
    order[i]->rows = std::clamp(order[i]->wanted(), 0, std::max(room - reserve, std::min(room, 1)));
    room -= order[i]->rows;
  }
  // Rows left blank go to entries cut to one line: whole, in order of importance, as far as they fit.
  for (Section* sec : order) {
    if (sec->shown() < sec->items.size()) continue;  // a cut section: its rows show more entries instead
    for (Item& it : sec->items) {
      const int extra = static_cast<int>(it.whole.size()) - 1;
      if (extra <= 0 || extra > room) continue;
      it.expanded = true;
      sec->rows += extra;
      room -= extra;
    }
  }
  std::string out =
      fit((s.batch.empty() ? "queue: " : "batch " + s.batch + ": ") + counts_text(s.counts), width) + "\n";
  for (int i = 0; i < held.rows; ++i) out += held.items[static_cast<size_t>(i)].cut + "\n";
  for (Section* sec : {&running, &recent, &batches, &daemons}) {
    if (sec->rows <= 0) continue;
    if (sec->items.empty()) {
      out += sec->header + " none\n";
      continue;
    }
    const size_t shown = sec->shown();
    out += sec->header;
    if (shown < sec->items.size())
      out += " " + std::to_string(shown) + " of " + std::to_string(sec->items.size()) + " shown";
    out += "\n";
    for (size_t i = 0; i < shown; ++i) {
      const Item& it = sec->items[i];
      if (!it.expanded)
        out += it.cut + "\n";
      else
        for (const std::string& l : it.whole) out += l + "\n";
    }
  }
  return out;
}

}  // namespace

StatusSnapshot for_terminal(const StatusSnapshot& raw) {
  // Every name and text a report prints comes from the queue, which anyone
  // who may submit writes: escaped once here, before any width is measured.
  StatusSnapshot s = raw;
  const auto clean = [](std::string& field) { field = daemon::escape_controls(to_valid_utf8(field), true); };
  clean(s.batch);
  clean(s.counts.held_reason);
  for (std::vector<jobs::Job>* list : {&s.running, &s.recent}) {
    for (jobs::Job& j : *list) {
      for (std::string* f : {&j.spec.model, &j.spec.batch, &j.spec.custom_id, &j.spec.prompt, &j.spec.messages,
                             &j.worker, &j.error, &j.error_kind})
        clean(*f);
      if (j.result) clean(j.result->text);
    }
  }
  for (jobs::BatchSummary& b : s.batches) {
    clean(b.name);
    clean(b.counts.held_reason);
  }
  for (jobs::WorkerInfo& w : s.workers) {
    for (std::string* f : {&w.id, &w.host, &w.model, &w.version, &w.problem}) clean(*f);
  }
  return s;
}

std::string format_status(const StatusSnapshot& raw, const StatusStyle& style) {
  const StatusSnapshot s = for_terminal(raw);
  if (style.height > 0) return format_screen(s, style);
  std::ostringstream o;
  const int width = std::max(style.width, 60);
  o << (s.batch.empty() ? "queue: " : "batch " + s.batch + ": ") << counts_text(s.counts) << "\n";
  if (!s.batch.empty() && s.counts.held > 0) o << held_text(s.counts, s.batch) << "\n";
  if (s.batch.empty() && s.counts.held > held_in_batches(s)) o << held_text(s.counts, "") << "\n";

  o << "\nrunning:";
  if (s.running.empty()) o << " none";
  o << "\n";
  for (const jobs::Job& j : s.running) {
    o << "  job " << j.id << "  " << j.spec.model << "  " << job_label(j, 40) << "  (" << j.worker << ")\n    ";
    if (style.bars && j.progress.updated_ms != 0) {
      const int bar = std::clamp(width / 3, 10, 40);
      if (in_prefill(j)) {
        o << "prefill " << progress_bar(j.progress.prefilled, j.progress.prompt_tokens, bar) << " ";
      } else {
        o << "decode  " << progress_bar(j.progress.generated, j.spec.sampling.max_tokens, bar) << " ";
      }
    }
    o << job_progress_text(j, s.now_ms) << "\n";
  }

  o << "\nlast finished:";
  if (s.recent.empty()) o << " none";
  o << "\n";
  for (const jobs::Job& j : s.recent) o << recent_line(j, s.now_ms, width - 52) << "\n";

  if (!s.batches.empty()) {
    o << "\nbatches:\n";
    for (const jobs::BatchSummary& b : s.batches) {
      o << batch_line(b, s.now_ms, style.bars) << "\n";
      if (s.batch.empty() && b.counts.held > 0) {
        for (const std::string& l : wrap(held_text(b.counts, b.name), 1 << 20, 0)) o << "    " << l << "\n";
      }
    }
  }

  std::vector<const jobs::WorkerInfo*> fleet;
  int64_t stopped = 0, last_stop_ms = 0;
  for (const jobs::WorkerInfo& w : s.workers) {
    if (!shown_worker(w, s.now_ms)) continue;
    fleet.push_back(&w);
    if (w.stopped_ms != 0) {
      ++stopped;
      last_stop_ms = std::max(last_stop_ms, w.stopped_ms);
    }
  }
  o << "\ndaemons:";
  if (fleet.empty()) o << " none has registered (start nightshiftd; jobs wait until one runs)";
  o << "\n";
  for (const jobs::WorkerInfo* w : fleet) {
    if (w->stopped_ms != 0 && stopped > 1) continue;  // one line for them all, below
    o << "  " << w->id << "  " << worker_state_text(*w, s.now_ms);
    if (w->stopped_ms == 0) {
      o << "  model " << (w->model.empty() ? "(none loaded)" : w->model);
      if (!w->jobs.empty()) o << "  jobs " << job_ids(w->jobs);
      if (const DaemonBatch b = daemon_batch(s, w->id); b.jobs > 0) o << "  batch: " << daemon_batch_text(b);
      o << "  heartbeat " << ago(s.now_ms, w->heartbeat_ms);
    }
    if (!w->version.empty()) o << "  version " << w->version;
    o << "\n";
    if (w->stopped_ms == 0 && !w->problem.empty()) o << "    CANNOT SERVE: " << w->problem << "\n";
  }
  // Each `--drain` run leaves a stopped daemon, listed for a day: together they are one line.
  if (stopped > 1) o << "  " << stopped << " stopped daemons, the last " << ago(s.now_ms, last_stop_ms) << "\n";
  return o.str();
}

std::string format_status_line(const StatusSnapshot& raw) {
  const StatusSnapshot s = for_terminal(raw);
  std::string line =
      jobs::iso8601_utc(s.now_ms) + " " + (s.batch.empty() ? "" : "batch " + s.batch + ": ") + counts_text(s.counts);
  if (s.counts.held > 0) line += " | held: " + s.counts.held_reason;
  for (const jobs::Job& j : s.running) line += " | job " + std::to_string(j.id) + " " + job_progress_text(j, s.now_ms);
  for (const jobs::WorkerInfo& w : s.workers) {
    if (const DaemonBatch b = daemon_batch(s, w.id); b.jobs > 1)
      line += " | batch " + w.id + " " + daemon_batch_text(b);
  }
  // Each named batch still running, with its ETA (its queued jobs included).
  for (const jobs::BatchSummary& b : s.batches) {
    if (b.counts.queued + b.counts.running == 0) continue;
    const jobs::QueueCounts& c = b.counts;
    line += " | " + b.name + " " + std::to_string(c.done + c.failed + c.cancelled + c.dead) + "/" +
            std::to_string(c.queued + c.running + c.done + c.failed + c.cancelled + c.dead) + " finished";
    if (const std::optional<double> eta = jobs::batch_eta_s(b.progress, s.now_ms))
      line += ", ETA " + format_duration(*eta);
  }
  return line;
}

nlohmann::json status_to_json(const StatusSnapshot& s) {
  using nlohmann::json;
  auto counts = [](const jobs::QueueCounts& c) {
    return json{{"queued", c.queued},
                {"running", c.running},
                {"done", c.done},
                {"failed", c.failed},
                {"cancelled", c.cancelled},
                {"dead", c.dead},
                {"retry_waiting", c.retry_waiting},
                {"held", c.held},
                {"held_reason", c.held == 0 ? json() : json(c.held_reason)}};
  };
  json running = json::array();
  for (const jobs::Job& j : s.running) {
    const jobs::JobProgress& p = j.progress;
    const std::optional<double> eta = job_eta_s(j, s.now_ms);
    running.push_back({{"id", j.id},
                       {"model", j.spec.model},
                       {"batch", j.spec.batch.empty() ? json() : json(j.spec.batch)},
                       {"custom_id", j.spec.custom_id.empty() ? json() : json(j.spec.custom_id)},
                       {"worker", j.worker},
                       {"started_ms", j.started_ms},
                       {"prompt_tokens", p.prompt_tokens},
                       {"prefilled", p.prefilled},
                       {"generated", p.generated},
                       {"max_tokens", j.spec.sampling.max_tokens},
                       {"tok_s", p.tok_s},
                       {"eta_s", eta ? json(*eta) : json()},
                       {"progress_ms", p.updated_ms == 0 ? json() : json(p.updated_ms)}});
  }
  json recent = json::array();
  for (const jobs::Job& j : s.recent) {
    recent.push_back({{"id", j.id},
                      {"state", jobs::state_name(j.state)},
                      {"finished_ms", j.finished_ms},
                      {"completion_tokens", j.result ? json(j.result->completion_tokens) : json()},
                      {"decode_tok_s", j.result ? json(j.result->decode_tok_s) : json()},
                      {"error", j.error.empty() ? json() : json(j.error_kind + ": " + j.error)}});
  }
  json batches = json::array();
  for (const jobs::BatchSummary& b : s.batches) {
    const std::optional<double> batch_eta = jobs::batch_eta_s(b.progress, s.now_ms);
    batches.push_back({{"name", b.name},
                       {"created_ms", b.created_ms},
                       {"finished_ms", b.finished_ms == 0 ? json() : json(b.finished_ms)},
                       {"counts", counts(b.counts)},
                       {"eta_s", batch_eta ? json(*batch_eta) : json()}});
  }
  json workers = json::array();
  for (const jobs::WorkerInfo& w : s.workers) {
    const DaemonBatch batch = daemon_batch(s, w.id);
    workers.push_back({{"id", w.id},
                       {"host", w.host},
                       {"pid", w.pid},
                       {"model", w.model},
                       {"version", w.version},
                       {"started_ms", w.started_ms},
                       {"heartbeat_ms", w.heartbeat_ms},
                       {"stopped_ms", w.stopped_ms == 0 ? json() : json(w.stopped_ms)},
                       {"state", worker_state_text(w, s.now_ms)},
                       {"problem", w.problem.empty() ? json() : json(w.problem)},
                       {"batch_jobs", batch.jobs},
                       {"batch_tok_s", batch.tok_s},
                       {"batch_eta_s", batch.eta_s ? json(*batch.eta_s) : json()},
                       {"jobs", w.jobs}});
  }
  return {{"now_ms", s.now_ms},         {"batch", s.batch.empty() ? json() : json(s.batch)},
          {"counts", counts(s.counts)}, {"running", running},
          {"recent", recent},           {"batches", batches},
          {"workers", workers}};
}

}  // namespace ns::cli
