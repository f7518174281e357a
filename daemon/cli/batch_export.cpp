#include "daemon/cli/batch_export.h"

#include <algorithm>

#include "common/error.h"
#include "engine/chat/chat_messages_json.h"
#include <map>
#include <tuple>
#include <vector>

namespace ns::cli {

namespace {

// The response of a job with a result: done, or cancelled with the partial output it had.
BatchSuccess success_of(const jobs::Job& job, const std::string& custom_id, const ToolFormatOf& tool_format) {
  BatchSuccess s;
  s.job_id = job.id;
  s.custom_id = custom_id;
  s.endpoint = job.spec.is_chat() ? BatchEndpoint::chat_completions : BatchEndpoint::completions;
  s.model = job.spec.model;
  s.created_unix_s = job.finished_ms / 1000;
  if (job.result) {
    s.text = job.result->text;
    s.finish_reason = job.result->finish_reason;
    s.prompt_tokens = job.result->prompt_tokens;
    s.completion_tokens = job.result->completion_tokens;
    for (const jobs::JobChoice& c : job.result->more_choices) s.more_choices.push_back({c.text, c.finish_reason});
    s.logprobs = job.result->logprobs;
  }
  if (job.spec.is_chat() && tool_format) {
    try {
      if (!chat::conversation_from_json(job.spec.messages).tools.empty()) s.tool_format = tool_format(job.spec.model);
    } catch (const Error&) {
      // unreadable stored messages: the text is exported as it is
    }
  }
  return s;
}

}  // namespace

std::string batch_output_line(const jobs::Job& job, const ToolFormatOf& tool_format) {
  const std::string custom_id = job.spec.custom_id.empty() ? "job-" + std::to_string(job.id) : job.spec.custom_id;
  const std::string cancel_message =
      job.error.empty() ? "the job was cancelled (nightshift cancel) before it finished" : job.error;
  switch (job.state) {
    case jobs::JobState::done: return format_batch_success(success_of(job, custom_id, tool_format));
    case jobs::JobState::cancelled:
      // A job cancelled mid-output keeps what it wrote (#31: export dropped it): the partial response, marked
      // by finish_reason "cancelled" and by the error beside it, so a reader that checks `error` skips it.
      if (job.result && (job.result->completion_tokens > 0 || !job.result->text.empty())) {
        BatchSuccess s = success_of(job, custom_id, tool_format);
        s.finish_reason = "cancelled";
        for (BatchChoice& c : s.more_choices)
          if (c.finish_reason != "stop" && c.finish_reason != "length") c.finish_reason = "cancelled";
        s.error_code = "cancelled";
        s.error_message = cancel_message + "; response.body holds the partial output (" +
                          std::to_string(s.completion_tokens) + " tokens, finish_reason \"cancelled\")";
        return format_batch_success(s);
      }
      [[fallthrough]];
    case jobs::JobState::failed:
    case jobs::JobState::dead: {
      BatchFailure f;
      f.job_id = job.id;
      f.custom_id = custom_id;
      if (job.state == jobs::JobState::cancelled) {
        f.code = "cancelled";
        f.message = cancel_message;
      } else {
        f.code = job.error_kind.empty() ? jobs::state_name(job.state) : job.error_kind;
        f.message = job.error.empty() ? std::string("the job is ") + jobs::state_name(job.state) : job.error;
        if (job.state == jobs::JobState::dead)
          f.message += " (gave up after " + std::to_string(job.attempts) + " attempts)";
      }
      return format_batch_failure(f);
    }
    case jobs::JobState::queued:
    case jobs::JobState::running: break;
  }
  return "";
}

ExportCounts export_batch_jsonl(jobs::Queue& queue, const std::string& batch, std::ostream& out,
                                const ToolFormatOf& tool_format) {
  jobs::ListFilter filter;
  filter.batch = batch;
  filter.limit = 0;
  filter.order = jobs::ListFilter::Order::oldest_first;
  std::vector<jobs::Job> jobs = queue.list(filter);
  // Input order: by line within each submitted file, files in the order
  // they were first submitted (a folder's documents have no line: by id).
  std::map<std::string, int64_t> first_id;
  for (const jobs::Job& job : jobs) first_id.emplace(job.spec.source_path, job.id);  // oldest first: the first wins
  auto rank = [&](const jobs::Job& j) { return std::tuple(first_id[j.spec.source_path], j.spec.source_line, j.id); };
  std::sort(jobs.begin(), jobs.end(), [&](const jobs::Job& a, const jobs::Job& b) { return rank(a) < rank(b); });
  ExportCounts counts;
  for (const jobs::Job& job : jobs) {
    switch (job.state) {
      case jobs::JobState::queued: ++counts.states.queued; break;
      case jobs::JobState::running: ++counts.states.running; break;
      case jobs::JobState::done: ++counts.states.done; break;
      case jobs::JobState::failed: ++counts.states.failed; break;
      case jobs::JobState::cancelled: ++counts.states.cancelled; break;
      case jobs::JobState::dead: ++counts.states.dead; break;
    }
    const std::string line = batch_output_line(job, tool_format);
    if (line.empty()) continue;
    out << line << '\n';
    ++counts.written;
    if (job.state != jobs::JobState::done) ++counts.errors;
  }
  return counts;
}

std::string describe_counts(const jobs::QueueCounts& c) {
  return std::to_string(c.done) + " done, " + std::to_string(c.failed) + " failed, " + std::to_string(c.cancelled) +
         " cancelled, " + std::to_string(c.dead) + " dead, " + std::to_string(c.queued) + " queued" +
         (c.held > 0 ? " (" + std::to_string(c.held) + " held)" : "") + ", " + std::to_string(c.running) + " running";
}

}  // namespace ns::cli
