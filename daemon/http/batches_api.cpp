#include "daemon/http/batches_api.h"

#include <algorithm>
#include <array>
#include <map>

#include "daemon/cli/batch_export.h"
#include "daemon/cli/jsonl_submit.h"
#include "daemon/http/batch_object.h"
#include "daemon/http/files_api.h"

namespace ns::http {
namespace {

using ordered_json = nlohmann::ordered_json;

constexpr const char* kUnknownModel = "unknown model '";  // the start of map_model's refusal (its code below)
constexpr const char* kWrongUrl = "url ";                 // ... and of the endpoint check's
constexpr int64_t kValidationStaleS = 60;  // a batch validating this long lost its creator: anyone redoes it

std::string names_of(const std::map<std::string, std::string>& m) {
  std::string out;
  for (const auto& [k, v] : m) out += (out.empty() ? "" : ", ") + k;
  return out.empty() ? "none" : out;
}

// body.model -> the configured model its job runs on.
std::string map_model(const daemon::Config& config, const std::string& name) {
  if (auto it = config.http.models.find(name); it != config.http.models.end()) return it->second;
  if (config.models.count(name) != 0) return name;
  throw Error(ErrorKind::invalid_input, std::string(kUnknownModel) + name + "': name a model of this daemon's " +
                                            "models: (" + names_of(config.models) +
                                            ") or an alias under http.models: (" + names_of(config.http.models) + ")");
}

jobs::ApiBatch stored(Session& s, const std::string& id) {
  std::optional<jobs::ApiBatch> b = s.store.batch(id);
  if (!b) throw ApiError(404, "no batch with id '" + id + "'", "batch_id", "batch_not_found");
  return *b;
}

// The refused requests and the counts of a batch that never queued a job.
void fail_validation(Session& s, jobs::ApiBatch& b, const std::vector<RejectedLine>& rejected) {
  const int64_t now = now_unix_s();
  b.errors = rejected_to_json(rejected);
  b.rejected = static_cast<int64_t>(rejected.size());
  b.completed = 0;
  b.failed = b.total;
  std::vector<jobs::ApiFile> files;
  std::string content;
  for (const RejectedLine& r : rejected) {
    if (r.line != 0) content += rejected_output_line(b.id, r) + "\n";
  }
  if (!content.empty()) {
    files.push_back({new_object_id("file-"), b.id + "_error.jsonl", "batch_output",
                     static_cast<int64_t>(content.size()), now, content});
    b.error_file_id = files.back().id;
  }
  set_status(b, "failed", now);
  s.store.update_batch(b, std::array<std::string, 1>{"validating"}, files);
}

// validating -> in_progress (or failed): the input file's requests become the batch's jobs.
void validate_and_queue(Session& s, jobs::ApiBatch b) {
  std::optional<jobs::ApiFile> input = s.store.file(b.input_file_id, true);
  if (!input) {
    fail_validation(s, b,
                    {{0, "", "file_not_found",
                      "the input file " + b.input_file_id +
                          " was deleted before the batch "
                          "was queued",
                      "input_file_id"}});
    return;
  }
  const daemon::Config& config = s.state.config;
  const bool chat = b.endpoint == "/v1/chat/completions";
  cli::JsonlSubmitOptions options;
  options.batch = b.id;
  options.source_path = b.input_file_id;
  options.map_model = [&](const std::string& name) { return map_model(config, name); };
  options.check = [&](const jobs::JobSpec& spec) -> std::string {
    if (spec.is_chat() != chat) {
      return std::string(kWrongUrl) + (spec.is_chat() ? "/v1/chat/completions" : "/v1/completions") +
             " is not the batch's endpoint " + b.endpoint + ": a batch runs requests of one endpoint";
    }
    std::lock_guard lock(s.state.model_mu);
    return s.state.model_check.problem(spec);
  };
  const cli::JsonlSubmitReport report = cli::submit_jsonl(s.queue, input->content, options);
  std::vector<RejectedLine> rejected;
  for (const cli::BatchLineError& e : report.rejected) {
    RejectedLine r{e.line, e.custom_id, "invalid_request", e.message, ""};
    if (e.message.starts_with(kUnknownModel)) {
      r.code = "model_not_found";
      r.param = "body.model";
    } else if (e.message.starts_with(kWrongUrl)) {
      r.code = "invalid_url";
      r.param = "url";
    }
    rejected.push_back(std::move(r));
  }
  b.total = report.lines;
  if (report.submitted.empty()) {
    fail_validation(s, b, rejected);
    return;
  }
  if (std::optional<jobs::Job> first = s.queue.get(report.submitted.front().id)) b.model = first->spec.model;
  b.errors = rejected_to_json(rejected);
  b.rejected = static_cast<int64_t>(rejected.size());
  set_status(b, "in_progress", now_unix_s());
  // False: a cancel came meanwhile; the cancelling batch cancels the jobs just queued too.
  s.store.update_batch(b, std::array<std::string, 1>{"validating"});
}

void cancel_unfinished(Session& s, const std::string& batch) {
  for (jobs::JobState state : {jobs::JobState::queued, jobs::JobState::running}) {
    jobs::ListFilter filter;
    filter.batch = batch;
    filter.state = state;
    filter.limit = 0;
    for (const jobs::Job& job : s.queue.list(filter)) s.queue.cancel(job.id);
  }
}

// Every job has ended: the output and error files, the final counts and usage, and `final_status`.
void finish_batch(Session& s, jobs::ApiBatch b, const std::string& final_status) {
  if (final_status == "completed" && b.status == "in_progress") {
    jobs::ApiBatch f = b;
    set_status(f, "finalizing", now_unix_s());
    if (!s.store.update_batch(f, std::array<std::string, 1>{"in_progress"})) return;  // another daemon moved it
    b = f;
  }
  jobs::ListFilter filter;
  filter.batch = b.id;
  filter.limit = 0;
  filter.order = jobs::ListFilter::Order::oldest_first;
  std::vector<jobs::Job> jobs = s.queue.list(filter);
  std::sort(jobs.begin(), jobs.end(), [](const jobs::Job& x, const jobs::Job& y) {
    return std::pair(x.spec.source_line, x.id) < std::pair(y.spec.source_line, y.id);
  });
  const cli::ToolFormatOf tool_format = [&](const std::string& model) {
    std::lock_guard lock(s.state.model_mu);
    return s.state.model_check.tool_format(model);
  };
  std::string output;
  std::vector<std::pair<int64_t, std::string>> errors;  // by input line
  for (const RejectedLine& r : rejected_from_json(b.errors)) {
    if (r.line != 0) errors.emplace_back(r.line, rejected_output_line(b.id, r));
  }
  b.completed = 0;
  b.failed = b.rejected;
  b.input_tokens = b.output_tokens = b.cached_tokens = 0;
  for (const jobs::Job& job : jobs) {
    const std::string line = cli::batch_output_line(job, tool_format);
    if (line.empty()) continue;  // not ended (a job retried by hand after the batch's jobs had all ended)
    if (job.result) {
      b.input_tokens += job.result->prompt_tokens;
      b.output_tokens += job.result->completion_tokens;
      b.cached_tokens += static_cast<int64_t>(job.result->prefix_tokens);
    }
    if (job.state == jobs::JobState::done) {
      output += line + "\n";
      ++b.completed;
    } else {
      errors.emplace_back(job.spec.source_line, line);
      ++b.failed;
    }
  }
  std::stable_sort(errors.begin(), errors.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::string error_text;
  for (const auto& [line, text] : errors) error_text += text + "\n";
  const int64_t now = now_unix_s();
  std::vector<jobs::ApiFile> files;
  if (!output.empty()) {
    files.push_back({new_object_id("file-"), b.id + "_output.jsonl", "batch_output",
                     static_cast<int64_t>(output.size()), now, std::move(output)});
    b.output_file_id = files.back().id;
  }
  if (!error_text.empty()) {
    files.push_back({new_object_id("file-"), b.id + "_error.jsonl", "batch_output",
                     static_cast<int64_t>(error_text.size()), now, std::move(error_text)});
    b.error_file_id = files.back().id;
  }
  const std::string from = b.status;
  set_status(b, final_status, now);
  s.store.update_batch(b, std::array<std::string, 1>{from}, files);  // false: another daemon finished it first
}

ordered_json batch_reply_json(Session& s, const jobs::ApiBatch& b) {
  return batch_json(b, is_final_status(b.status) ? jobs::QueueCounts{} : s.queue.counts(b.id));
}

}  // namespace

jobs::ApiBatch refresh_batch(Session& s, jobs::ApiBatch b) {
  if (is_final_status(b.status)) return b;
  const int64_t now = now_unix_s();
  if (b.status == "validating") {
    if (now - b.created_at < kValidationStaleS) return b;
    validate_and_queue(s, b);  // submission is idempotent: what the first try queued is found, not queued twice
    return stored(s, b.id);
  }
  const BatchPlan plan = plan_batch(b, s.queue.counts(b.id), now);
  switch (plan.step) {
    case BatchStep::none: return b;
    case BatchStep::cancel_jobs: cancel_unfinished(s, b.id); break;
    case BatchStep::finish: finish_batch(s, b, plan.final_status); break;
  }
  return stored(s, b.id);
}

Reply create_batch(Session& s, const httplib::Request& req) {
  nlohmann::json body;
  try {
    body = nlohmann::json::parse(req.body);
  } catch (const nlohmann::json::exception& e) {
    throw ApiError(400, std::string("the request body is not JSON: ") + e.what());
  }
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  for (const auto& [key, value] : body.items()) {
    if (key != "input_file_id" && key != "endpoint" && key != "completion_window" && key != "metadata") {
      throw ApiError(400, "unknown parameter '" + key + "': give input_file_id, endpoint, completion_window, metadata",
                     key);
    }
  }
  const auto text = [&](const char* key) {
    if (!body.contains(key) || !body[key].is_string())
      throw ApiError(400, std::string(key) + " (a string) is required", key);
    return body[key].get<std::string>();
  };
  jobs::ApiBatch b;
  b.input_file_id = text("input_file_id");
  b.endpoint = text("endpoint");
  b.completion_window = text("completion_window");
  if (b.endpoint != "/v1/chat/completions" && b.endpoint != "/v1/completions") {
    throw ApiError(400,
                   "endpoint '" + b.endpoint +
                       "' is not served: nightshift runs /v1/chat/completions and "
                       "/v1/completions batches",
                   "endpoint");
  }
  int64_t window = 0;
  try {
    window = completion_window_seconds(b.completion_window);
  } catch (const Error& e) {
    throw ApiError(400, e.what(), "completion_window");
  }
  const nlohmann::json metadata = body.value("metadata", nlohmann::json());
  if (const std::string problem = metadata_problem(metadata); !problem.empty())
    throw ApiError(400, problem, "metadata");
  if (!metadata.is_null()) b.metadata = metadata.dump();
  const std::optional<jobs::ApiFile> input = s.store.file(b.input_file_id, false);
  if (!input) throw ApiError(404, "no file with id '" + b.input_file_id + "'", "input_file_id", "file_not_found");
  if (input->purpose != "batch") {
    throw ApiError(400,
                   "file " + b.input_file_id + " has purpose " + input->purpose +
                       ", not batch: upload the requests with purpose=batch",
                   "input_file_id");
  }
  b.id = new_object_id("batch_");
  b.status = "validating";
  b.created_at = now_unix_s();
  b.expires_at = b.created_at + window;
  s.store.add_batch(b);
  validate_and_queue(s, b);
  return json_reply(batch_reply_json(s, stored(s, b.id)));
}

Reply get_batch(Session& s, const httplib::Request& req) {
  return json_reply(batch_reply_json(s, refresh_batch(s, stored(s, req.matches[1]))));
}

Reply list_batches(Session& s, const httplib::Request& req) {
  const int32_t limit = limit_param(req, 20, 100);
  const std::string after = req.has_param("after") ? req.get_param_value("after") : "";
  std::vector<jobs::ApiBatch> batches = s.store.batches(after, limit + 1);
  const bool has_more = batches.size() > static_cast<size_t>(limit);
  if (has_more) batches.pop_back();
  ordered_json data = ordered_json::array();
  for (const jobs::ApiBatch& b : batches) data.push_back(batch_reply_json(s, refresh_batch(s, b)));
  ordered_json j;
  j["object"] = "list";
  j["data"] = std::move(data);
  j["first_id"] = batches.empty() ? ordered_json(nullptr) : ordered_json(batches.front().id);
  j["last_id"] = batches.empty() ? ordered_json(nullptr) : ordered_json(batches.back().id);
  j["has_more"] = has_more;
  return json_reply(j);
}

Reply cancel_batch(Session& s, const httplib::Request& req) {
  jobs::ApiBatch b = stored(s, req.matches[1]);
  if (b.status == "completed" || b.status == "failed" || b.status == "expired") {
    throw ApiError(409, "batch " + b.id + " is " + b.status + "; only a batch that has not ended can be cancelled",
                   "batch_id");
  }
  if (b.status != "cancelling" && b.status != "cancelled") {
    const std::string from = b.status;
    set_status(b, "cancelling", now_unix_s());
    if (!s.store.update_batch(b, std::array<std::string, 1>{from}))
      return cancel_batch(s, req);  // it moved: look again
  }
  if (b.status == "cancelling") cancel_unfinished(s, b.id);
  return json_reply(batch_reply_json(s, refresh_batch(s, stored(s, b.id))));
}

}  // namespace ns::http
