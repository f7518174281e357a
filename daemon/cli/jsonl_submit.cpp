#include "daemon/cli/jsonl_submit.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <span>

#include "daemon/cli/sha256.h"
#include "engine/chat/chat_messages_json.h"
#include "common/error.h"

namespace ns::cli {
namespace {

constexpr size_t kChunk = 200;  // jobs per transaction

// A job the batch holds already, as a resubmitted line is compared with it.
struct Existing {
  std::string key;
  int64_t id = 0;
  std::string fingerprint;                // of its spec as it is now (a retry --model changes it)
  std::string fingerprint_without_model;  // the same with the model left out
  std::string model;
  std::string state;  // its state's name, or "held"
};

// Length-prefixed fields, so no two different specs serialise alike.
void field(std::string& out, std::string_view name, std::string_view value) {
  out += name;
  out += ':';
  out += std::to_string(value.size());
  out += ':';
  out += value;
  out += ';';
}

std::string number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

}  // namespace

int64_t JsonlSubmitReport::created() const {
  return std::count_if(submitted.begin(), submitted.end(), [](const JsonlSubmitted& s) { return s.created; });
}

std::string spec_fingerprint(const jobs::JobSpec& spec) {
  const SamplingParams& p = spec.sampling;
  std::string text;
  field(text, "model", spec.model);
  field(text, "prompt", spec.prompt);
  field(text, "messages", spec.messages);
  field(text, "max_tokens", std::to_string(p.max_tokens));
  field(text, "temperature", number(p.temperature));
  field(text, "top_k", std::to_string(p.top_k));
  field(text, "top_p", number(p.top_p));
  field(text, "min_p", number(p.min_p));
  field(text, "repeat_penalty", number(p.repeat_penalty));
  field(text, "repeat_last_n", std::to_string(p.repeat_last_n));
  field(text, "seed", std::to_string(p.seed));
  for (const std::string& s : p.stop) field(text, "stop", s);
  field(text, "ignore_eos", p.ignore_eos ? "1" : "0");
  if (!p.grammar.empty()) field(text, "grammar", p.grammar);  // absent before grammars: old keys stay valid
  return sha256_hex(text);
}

jobs::JobSpec jsonl_job_spec(const BatchRequest& request, const JsonlSubmitOptions& options) {
  jobs::JobSpec spec;
  spec.model = options.model.empty() ? request.model : options.model;
  if (spec.model.empty()) {
    throw Error(ErrorKind::invalid_input,
                "no model: the line has no body.model; give --model NAME (a model from the daemon config's models:)");
  }
  if (options.map_model) spec.model = options.map_model(spec.model);
  if (request.is_chat()) {
    spec.messages = chat::conversation_to_json(request.messages, request.tools);
  } else {
    spec.prompt = request.prompt;
  }
  spec.sampling = request.sampling;
  spec.priority = options.priority;
  spec.max_attempts = options.max_attempts;
  spec.batch = options.batch;
  spec.custom_id = request.custom_id;
  spec.source_path = options.source_path;
  spec.source_line = static_cast<int32_t>(request.line);
  // The fingerprint's first 16 hex digits (64 bits) are plenty to tell
  // versions of one custom_id apart.
  spec.idempotency_key =
      "jsonl:" + options.batch + ":" + request.custom_id + ":" + spec_fingerprint(spec).substr(0, 16);
  if (std::string problem = jobs::spec_problem(spec); !problem.empty()) throw Error(ErrorKind::invalid_input, problem);
  return spec;
}

JsonlSubmitReport submit_jsonl(jobs::Queue& queue, std::string_view text, const JsonlSubmitOptions& options) {
  if (options.batch.empty()) throw Error(ErrorKind::invalid_input, "the batch needs a name (--batch NAME)");
  BatchInput input = parse_batch_jsonl(text, options.defaults);
  JsonlSubmitReport report;
  report.lines = input.lines;
  report.rejected = std::move(input.errors);

  // What the batch holds already, by custom_id: a resubmitted line finds its
  // own key there (or its fingerprint, once `retry --model` moved the job);
  // a changed line finds another one.
  std::map<std::string, Existing> existing;
  jobs::ListFilter filter;
  filter.batch = options.batch;
  filter.limit = 0;
  filter.order = jobs::ListFilter::Order::oldest_first;
  for (const jobs::Job& job : queue.list(filter)) {
    if (job.spec.custom_id.empty()) continue;
    jobs::JobSpec other_model = job.spec;
    other_model.model.clear();
    existing[job.spec.custom_id] = {
        job.spec.idempotency_key,      job.id,         spec_fingerprint(job.spec),
        spec_fingerprint(other_model), job.spec.model, jobs::is_held(job) ? "held" : jobs::state_name(job.state)};
  }

  std::vector<jobs::JobSpec> specs;
  std::vector<JsonlSubmitted> pending;
  for (const BatchRequest& request : input.requests) {
    try {
      jobs::JobSpec spec = jsonl_job_spec(request, options);
      if (auto it = existing.find(request.custom_id); it != existing.end()) {
        const Existing& e = it->second;
        if (e.key == spec.idempotency_key || e.fingerprint == spec_fingerprint(spec)) {
          report.submitted.push_back({request.line, request.custom_id, e.id, false, e.state});
          continue;
        }
        jobs::JobSpec other_model = spec;
        other_model.model.clear();
        const bool movable = e.state == "failed" || e.state == "dead" || e.state == "cancelled" || e.state == "held";
        if (movable && e.fingerprint_without_model == spec_fingerprint(other_model)) {
          // The same words for every such line, so the report says them once.
          throw Error(ErrorKind::invalid_input,
                      "only the model differs from the batch's " + e.state + " job for this custom_id (model '" +
                          e.model + "'): to run batch " + options.batch +
                          "'s held, failed, dead and cancelled jobs "
                          "on model '" +
                          spec.model + "': nightshift retry --batch " + options.batch + " --model " + spec.model);
        }
        throw Error(ErrorKind::invalid_input,
                    "custom_id \"" + request.custom_id + "\" is already job " + std::to_string(e.id) + " (" + e.state +
                        ") of batch " + options.batch +
                        " with other content (prompt, messages, model or sampling): give the changed request a new "
                        "custom_id, or submit the file as a new batch (--batch NAME)");
      }
      // Checked only when it would be queued: a line the batch holds already is not run again.
      if (options.check) {
        if (std::string problem = options.check(spec); !problem.empty()) {
          // A file written for OpenAI names OpenAI's models: --model is the one-flag fix.
          if (options.model.empty() && problem.starts_with("model '" + spec.model + "' is not under models:")) {
            problem += "; --model NAME runs every line on that model instead of body.model";
          }
          throw Error(ErrorKind::invalid_input, problem);
        }
      }
      specs.push_back(std::move(spec));
      pending.push_back({request.line, request.custom_id, 0, true});
    } catch (const Error& e) {
      report.rejected.push_back({request.line, request.custom_id, e.what()});
    }
  }
  for (size_t i = 0; i < specs.size(); i += kChunk) {
    const size_t n = std::min(kChunk, specs.size() - i);
    const std::vector<jobs::SubmitOutcome> outs = queue.submit_many(std::span(specs).subspan(i, n));
    for (size_t k = 0; k < n; ++k) {
      pending[i + k].id = outs[k].id;
      pending[i + k].created = outs[k].created;
    }
  }
  report.submitted.insert(report.submitted.end(), pending.begin(), pending.end());
  auto by_line = [](const auto& a, const auto& b) { return a.line < b.line; };
  std::sort(report.submitted.begin(), report.submitted.end(), by_line);
  std::sort(report.rejected.begin(), report.rejected.end(), by_line);
  return report;
}

std::string batch_name_from_path(const std::string& path) {
  std::string name = std::filesystem::path(path).stem().string();
  return name.empty() ? "stdin" : name;
}

}  // namespace ns::cli
