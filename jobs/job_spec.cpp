// spec_problem(): what every backend checks before queueing a job, and what
// the daemon checks again on the rows it claims.
#include <nlohmann/json.hpp>

#include <string>

#include "common/utf8.h"
#include "jobs/queue.h"

namespace ns::jobs {

size_t invalid_utf8_offset(std::string_view s) {
  const size_t valid = valid_utf8_prefix_length(s);
  return valid == s.size() ? std::string_view::npos : valid;
}

std::string messages_problem(const std::string& messages) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(messages);
  } catch (const nlohmann::json::exception& e) {
    return std::string("the chat messages are not JSON: ") + e.what();
  }
  if (!j.is_array() || j.empty()) {
    return "the chat messages must be a non-empty JSON array of {\"role\": ..., \"content\": ...} objects";
  }
  for (size_t i = 0; i < j.size(); ++i) {
    const auto& m = j[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return at + " is not an object; each message is {\"role\": ..., \"content\": ...}";
    if (!m.contains("role") || !m["role"].is_string() || m["role"].get<std::string>().empty()) {
      return at + " has no \"role\" string (system, user, assistant or tool)";
    }
    if (!m.contains("content") || !m["content"].is_string()) {
      return at + " has no \"content\" string (text parts arrays are flattened by `nightshift submit`)";
    }
  }
  return "";
}

std::string spec_problem(const JobSpec& spec) {
  if (spec.model.empty()) {
    return "the job names no model; give one of the names under `models:` in the daemon's config";
  }
  if (!spec.prompt.empty() && !spec.messages.empty()) {
    return "the job has both a prompt and chat messages; give one of them";
  }
  const std::string& input = spec.is_chat() ? spec.messages : spec.prompt;
  const char* what = spec.is_chat() ? "the chat messages are" : "the prompt is";
  if (input.empty()) return "the job's prompt is empty; give the text to continue";
  if (input.size() > kMaxPromptBytes) {
    return std::string(what) + " " + std::to_string(input.size()) + " bytes; at most " +
           std::to_string(kMaxPromptBytes) + " bytes (8 MiB) are accepted: split the document";
  }
  if (const size_t at = invalid_utf8_offset(input); at != std::string_view::npos) {
    return std::string(what) + " not valid UTF-8 (bad byte sequence at byte " + std::to_string(at) +
           "); convert the file to UTF-8 first (e.g. iconv -f latin1 -t utf-8)";
  }
  // One rule for every backend and every way in: PostgreSQL text cannot hold
  // U+0000, and a NUL in a prompt is a binary file read as text anyway.
  if (const size_t at = input.find('\0'); at != std::string::npos) {
    return std::string(spec.is_chat() ? "the chat messages hold" : "the prompt holds") + " a NUL byte (at byte " +
           std::to_string(at) + "), which no queue stores: remove it (tr -d '\\000') or check the file is text";
  }
  if (spec.is_chat()) {
    if (std::string problem = messages_problem(spec.messages); !problem.empty()) return problem;
  }
  if (spec.source_line < 0) return "source_line must be 1 or more (0 = none)";
  if (!spec.custom_id.empty() && spec.batch.empty()) {
    return "custom_id '" + spec.custom_id + "' is given without a batch; custom ids are unique within a batch";
  }
  if (std::string problem = spec.sampling.validate(); !problem.empty()) {
    return "invalid sampling parameters: " + problem;
  }
  for (size_t i = 0; i < spec.sampling.stop.size(); ++i) {
    if (invalid_utf8_offset(spec.sampling.stop[i]) != std::string_view::npos) {
      return "invalid sampling parameters: stop[" + std::to_string(i) + "] is not valid UTF-8";
    }
    if (spec.sampling.stop[i].find('\0') != std::string::npos) {
      return "invalid sampling parameters: stop[" + std::to_string(i) + "] holds a NUL byte";
    }
  }
  if (const size_t at = invalid_utf8_offset(spec.sampling.grammar); at != std::string_view::npos) {
    return "invalid sampling parameters: the grammar is not valid UTF-8 (bad byte sequence at byte " +
           std::to_string(at) + ")";
  }
  if (spec.sampling.grammar.find('\0') != std::string::npos) {
    return "invalid sampling parameters: the grammar holds a NUL byte; write it as \\x00 in a literal or class";
  }
  if (spec.max_attempts < 1 || spec.max_attempts > kMaxMaxAttempts) {
    return "max_attempts = " + std::to_string(spec.max_attempts) + " is out of range: allowed 1.." +
           std::to_string(kMaxMaxAttempts);
  }
  if (spec.not_before_ms < 0) return "not_before must not be before 1970";
  return "";
}

std::string spec_difference(const JobSpec& existing, const JobSpec& wanted) {
  std::string parts, sampling;
  const auto add = [](std::string& list, const char* what, bool differs) {
    if (differs) list += (list.empty() ? "" : ", ") + std::string(what);
  };
  add(parts, "model", existing.model != wanted.model);
  add(parts, "prompt", existing.prompt != wanted.prompt);
  add(parts, "messages", existing.messages != wanted.messages);
  const SamplingParams& a = existing.sampling;
  const SamplingParams& b = wanted.sampling;
  // Floats round-trip exactly through the database's REAL columns.
  add(sampling, "max_tokens", a.max_tokens != b.max_tokens);
  add(sampling, "temperature", a.temperature != b.temperature);
  add(sampling, "top_k", a.top_k != b.top_k);
  add(sampling, "top_p", a.top_p != b.top_p);
  add(sampling, "min_p", a.min_p != b.min_p);
  add(sampling, "repeat_penalty", a.repeat_penalty != b.repeat_penalty);
  add(sampling, "repeat_last_n", a.repeat_last_n != b.repeat_last_n);
  add(sampling, "seed", a.seed != b.seed);
  add(sampling, "stop", a.stop != b.stop);
  add(sampling, "ignore_eos", a.ignore_eos != b.ignore_eos);
  add(sampling, "grammar", a.grammar != b.grammar);
  add(sampling, "n", a.n != b.n);
  add(sampling, "logprobs", a.logprobs != b.logprobs || a.top_logprobs != b.top_logprobs);
  if (!sampling.empty()) parts += (parts.empty() ? "" : ", ") + ("sampling (" + sampling + ")");
  return parts;
}

}  // namespace ns::jobs
