#include "daemon/http/batch_object.h"

#include "common/error.h"

namespace ns::http {
namespace {

using ordered_json = nlohmann::ordered_json;

ordered_json time_or_null(int64_t t) { return t == 0 ? ordered_json(nullptr) : ordered_json(t); }
ordered_json text_or_null(const std::string& s) { return s.empty() ? ordered_json(nullptr) : ordered_json(s); }

int64_t unfinished(const jobs::QueueCounts& c) { return c.queued + c.running; }

}  // namespace

bool is_final_status(const std::string& status) {
  return status == "completed" || status == "failed" || status == "cancelled" || status == "expired";
}

RequestCounts request_counts(const jobs::ApiBatch& batch, const jobs::QueueCounts& jobs) {
  if (is_final_status(batch.status)) return {batch.total, batch.completed, batch.failed};
  return {batch.total, jobs.done, batch.rejected + jobs.failed + jobs.dead + jobs.cancelled};
}

BatchPlan plan_batch(const jobs::ApiBatch& batch, const jobs::QueueCounts& jobs, int64_t now_s) {
  const bool window_passed = batch.expires_at != 0 && now_s >= batch.expires_at;
  const bool all_ended = unfinished(jobs) == 0;
  if (batch.status == "cancelling") {
    return all_ended ? BatchPlan{BatchStep::finish, "cancelled"} : BatchPlan{BatchStep::cancel_jobs, ""};
  }
  if (batch.status == "in_progress" || batch.status == "finalizing") {
    // Expired only when the window's end cut jobs off; a batch whose jobs all
    // finished in time is completed whenever someone looks.
    if (all_ended) return {BatchStep::finish, window_passed && jobs.cancelled > 0 ? "expired" : "completed"};
    if (window_passed) return {BatchStep::cancel_jobs, ""};
  }
  return {};
}

void set_status(jobs::ApiBatch& batch, const std::string& status, int64_t now_s) {
  batch.status = status;
  if (status == "in_progress") batch.in_progress_at = now_s;
  if (status == "finalizing") batch.finalizing_at = now_s;
  if (status == "completed") {
    if (batch.finalizing_at == 0) batch.finalizing_at = now_s;
    batch.completed_at = now_s;
  }
  if (status == "failed") batch.failed_at = now_s;
  if (status == "cancelling") batch.cancelling_at = now_s;
  if (status == "cancelled") batch.cancelled_at = now_s;
  if (status == "expired") batch.expired_at = now_s;
}

ordered_json batch_json(const jobs::ApiBatch& b, const jobs::QueueCounts& jobs) {
  ordered_json j;
  j["id"] = b.id;
  j["object"] = "batch";
  j["endpoint"] = b.endpoint;
  j["model"] = text_or_null(b.model);
  if (b.errors.empty()) {
    j["errors"] = nullptr;
  } else {
    ordered_json data = ordered_json::array();
    for (const RejectedLine& r : rejected_from_json(b.errors)) {
      data.push_back({{"code", r.code},
                      {"line", r.line == 0 ? ordered_json(nullptr) : ordered_json(r.line)},
                      {"message", r.message},
                      {"param", text_or_null(r.param)}});
    }
    j["errors"] = {{"object", "list"}, {"data", std::move(data)}};
  }
  j["input_file_id"] = b.input_file_id;
  j["completion_window"] = b.completion_window;
  j["status"] = b.status;
  j["output_file_id"] = text_or_null(b.output_file_id);
  j["error_file_id"] = text_or_null(b.error_file_id);
  j["created_at"] = b.created_at;
  j["in_progress_at"] = time_or_null(b.in_progress_at);
  j["expires_at"] = time_or_null(b.expires_at);
  j["finalizing_at"] = time_or_null(b.finalizing_at);
  j["completed_at"] = time_or_null(b.completed_at);
  j["failed_at"] = time_or_null(b.failed_at);
  j["expired_at"] = time_or_null(b.expired_at);
  j["cancelling_at"] = time_or_null(b.cancelling_at);
  j["cancelled_at"] = time_or_null(b.cancelled_at);
  const RequestCounts c = request_counts(b, jobs);
  j["request_counts"] = {{"total", c.total}, {"completed", c.completed}, {"failed", c.failed}};
  if (is_final_status(b.status)) {
    j["usage"] = {{"input_tokens", b.input_tokens},
                  {"input_tokens_details", {{"cached_tokens", b.cached_tokens}}},
                  {"output_tokens", b.output_tokens},
                  {"output_tokens_details", {{"reasoning_tokens", 0}}},
                  {"total_tokens", b.input_tokens + b.output_tokens}};
  }
  j["metadata"] = b.metadata.empty() ? ordered_json(nullptr) : ordered_json::parse(b.metadata);
  return j;
}

ordered_json file_json(const jobs::ApiFile& f) {
  return {{"id", f.id},
          {"object", "file"},
          {"bytes", f.bytes},
          {"created_at", f.created_at},
          {"expires_at", nullptr},
          {"filename", f.filename},
          {"purpose", f.purpose},
          {"status", "processed"},
          {"status_details", nullptr}};
}

int64_t completion_window_seconds(const std::string& window) {
  const auto bad = [&] {
    return Error(ErrorKind::invalid_input,
                 "completion_window '" + window + "' is not a number of hours from 1h to 720h (OpenAI's is \"24h\")");
  };
  if (window.size() < 2 || window.size() > 4 || window.back() != 'h') throw bad();
  const std::string hours = window.substr(0, window.size() - 1);
  if (hours.find_first_not_of("0123456789") != std::string::npos) throw bad();
  const int64_t h = std::stoll(hours);
  if (h < 1 || h > 720) throw bad();
  return h * 3600;
}

std::string metadata_problem(const nlohmann::json& metadata) {
  if (metadata.is_null()) return "";
  if (!metadata.is_object()) return "metadata must be an object of string values";
  if (metadata.size() > 16) return "metadata has " + std::to_string(metadata.size()) + " keys; at most 16";
  for (const auto& [key, value] : metadata.items()) {
    if (key.size() > 64) return "metadata key '" + key.substr(0, 64) + "...' is longer than 64 characters";
    if (!value.is_string()) return "metadata." + key + " must be a string";
    if (value.get_ref<const std::string&>().size() > 512) return "metadata." + key + " is longer than 512 characters";
  }
  return "";
}

std::string rejected_to_json(const std::vector<RejectedLine>& lines) {
  if (lines.empty()) return "";
  nlohmann::json a = nlohmann::json::array();
  for (const RejectedLine& r : lines) {
    a.push_back(
        {{"line", r.line}, {"custom_id", r.custom_id}, {"code", r.code}, {"message", r.message}, {"param", r.param}});
  }
  return a.dump();
}

std::vector<RejectedLine> rejected_from_json(const std::string& text) {
  std::vector<RejectedLine> out;
  if (text.empty()) return out;
  for (const nlohmann::json& r : nlohmann::json::parse(text)) {
    out.push_back({r.at("line").get<int64_t>(), r.at("custom_id").get<std::string>(), r.at("code").get<std::string>(),
                   r.at("message").get<std::string>(), r.at("param").get<std::string>()});
  }
  return out;
}

std::string rejected_output_line(const std::string& batch_id, const RejectedLine& r) {
  ordered_json line;
  line["id"] = "batch_req_" + batch_id + "_line" + std::to_string(r.line);
  line["custom_id"] = r.custom_id;
  line["response"] = nullptr;
  line["error"] = {{"code", r.code}, {"message", r.message}};
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace ns::http
