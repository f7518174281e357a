#include "daemon/http/files_api.h"

#include "daemon/cli/openai_batch.h"
#include "daemon/http/batch_object.h"

namespace ns::http {
namespace {

constexpr size_t kLinesNamed = 10;  // bad lines an upload's error lists (then "and N more")

// A client's file name, kept only as a label: printable, at most 255 bytes.
std::string clean_filename(const std::string& name) {
  std::string out;
  for (char c : name.substr(0, 255)) out += static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? '_' : c;
  return out.empty() ? "upload.jsonl" : out;
}

}  // namespace

int32_t limit_param(const httplib::Request& req, int32_t fallback, int32_t max) {
  if (!req.has_param("limit")) return fallback;
  const std::string v = req.get_param_value("limit");
  if (v.empty() || v.size() > 9 || v.find_first_not_of("0123456789") != std::string::npos || std::stoi(v) < 1 ||
      std::stoi(v) > max) {
    throw ApiError(400, "limit '" + v + "' must be a whole number from 1 to " + std::to_string(max), "limit");
  }
  return std::stoi(v);
}

Reply upload_file(Session& s, const httplib::Request& req) {
  if (!req.is_multipart_form_data()) {
    throw ApiError(400, "POST /v1/files takes multipart/form-data with the fields file and purpose");
  }
  for (const auto& [name, field] : req.files) {
    if (name != "file" && name != "purpose") {
      throw ApiError(400, "unknown field '" + name + "': POST /v1/files takes file and purpose", name);
    }
  }
  if (!req.has_file("purpose")) throw ApiError(400, "missing purpose: give purpose=batch", "purpose");
  const std::string purpose = req.get_file_value("purpose").content;
  if (purpose != "batch") {
    throw ApiError(400,
                   "purpose '" + purpose + "' is not served here: nightshift takes batch input files (purpose=batch)",
                   "purpose");
  }
  if (!req.has_file("file"))
    throw ApiError(400, "missing file: upload the JSONL batch input as the field file", "file");
  const httplib::MultipartFormData file = req.get_file_value("file");
  const daemon::HttpConfig& cfg = s.state.config.http;
  if (file.content.size() > cfg.max_file_bytes) {
    throw ApiError(413,
                   "the file has " + std::to_string(file.content.size()) + " bytes; http.max_file_bytes allows " +
                       std::to_string(cfg.max_file_bytes) + " (split it into several batches)",
                   "file");
  }
  cli::BatchInput input = cli::parse_batch_jsonl(file.content, SamplingParams{});
  for (const cli::BatchRequest& r : input.requests) {
    if (r.model.empty()) {
      input.errors.push_back({r.line, r.custom_id,
                              "no body.model: name a model of the daemon's config (models: or "
                              "http.models:)"});
    }
  }
  if (input.lines == 0) throw ApiError(400, "the file holds no request (one JSON request a line)", "file");
  if (input.lines > cfg.max_lines) {
    throw ApiError(400,
                   "the file has " + std::to_string(input.lines) + " requests; http.max_lines allows " +
                       std::to_string(cfg.max_lines) + " (split it into several batches)",
                   "file");
  }
  if (!input.errors.empty()) {
    std::sort(input.errors.begin(), input.errors.end(), [](const auto& a, const auto& b) { return a.line < b.line; });
    std::string msg = std::to_string(input.errors.size()) + " of " + std::to_string(input.lines) +
                      " lines are not valid batch requests; nothing was stored: ";
    for (size_t i = 0; i < input.errors.size() && i < kLinesNamed; ++i) {
      msg += (i == 0 ? "" : "; ") + cli::describe(input.errors[i]);
    }
    if (input.errors.size() > kLinesNamed)
      msg += "; and " + std::to_string(input.errors.size() - kLinesNamed) + " more";
    throw ApiError(400, msg, "file", "invalid_file");
  }
  jobs::ApiFile f;
  f.id = new_object_id("file-");
  f.filename = clean_filename(file.filename);
  f.purpose = purpose;
  f.bytes = static_cast<int64_t>(file.content.size());
  f.created_at = now_unix_s();
  f.content = file.content;
  s.store.add_file(f);
  return json_reply(file_json(f));
}

Reply list_files(Session& s, const httplib::Request& req) {
  const int32_t limit = limit_param(req, 10000, 10000);
  const std::string order = req.has_param("order") ? req.get_param_value("order") : "desc";
  if (order != "asc" && order != "desc") throw ApiError(400, "order '" + order + "' must be asc or desc", "order");
  const std::string purpose = req.has_param("purpose") ? req.get_param_value("purpose") : "";
  const std::string after = req.has_param("after") ? req.get_param_value("after") : "";
  std::vector<jobs::ApiFile> files = s.store.files(purpose, after, limit + 1, order == "asc");
  const bool has_more = files.size() > static_cast<size_t>(limit);
  if (has_more) files.pop_back();
  nlohmann::ordered_json data = nlohmann::ordered_json::array();
  for (const jobs::ApiFile& f : files) data.push_back(file_json(f));
  nlohmann::ordered_json j;
  j["object"] = "list";
  j["data"] = std::move(data);
  j["first_id"] = files.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(files.front().id);
  j["last_id"] = files.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(files.back().id);
  j["has_more"] = has_more;
  return json_reply(j);
}

namespace {
jobs::ApiFile find_file(Session& s, const std::string& id, bool with_content) {
  std::optional<jobs::ApiFile> f = s.store.file(id, with_content);
  if (!f) throw ApiError(404, "no file with id '" + id + "'", "file_id", "file_not_found");
  return *f;
}
}  // namespace

Reply get_file(Session& s, const httplib::Request& req) {
  return json_reply(file_json(find_file(s, req.matches[1], false)));
}

Reply get_file_content(Session& s, const httplib::Request& req) {
  jobs::ApiFile f = find_file(s, req.matches[1], true);
  return {200, std::move(f.content), "application/octet-stream"};
}

Reply delete_file(Session& s, const httplib::Request& req) {
  const std::string id = req.matches[1];
  if (!s.store.delete_file(id)) throw ApiError(404, "no file with id '" + id + "'", "file_id", "file_not_found");
  return json_reply({{"id", id}, {"object", "file"}, {"deleted", true}});
}

}  // namespace ns::http
