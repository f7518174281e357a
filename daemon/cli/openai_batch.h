// OpenAI Batch API JSONL, both ways, as pure functions over strings and structs
// (the format is described for users in docs/batch-jsonl.md).
//
// Input, one request per line:
//   {"custom_id": "req-1", "method": "POST", "url": "/v1/completions" | "/v1/chat/completions",
//    "body": {"model": "...", "prompt": "..." | "messages": [...], "max_tokens": 200, "temperature": 0.7,
//             "top_p": 0.9, "seed": 1, "stop": "\n\n" | ["a", "b"], ...}}
// Output, one line per finished request:
//   {"id": "batch_req_<job>", "custom_id": "req-1",
//    "response": {"status_code": 200, "request_id": "req_<job>", "body": {"id": "cmpl-<job>",
//      "object": "text_completion" | "chat.completion", "created": <unix s>, "model": "...",
//      "choices": [{"index": 0, "text": "..." | "message": {"role": "assistant", "content": "..."},
//                   "logprobs": null | {...}, "finish_reason": "stop" | "length"}, ... n choices],
//      "usage": {"prompt_tokens": n, "completion_tokens": m, "total_tokens": n + m}}},
//    "error": null}
//   or, for a request that failed: {"id", "custom_id", "response": null, "error": {"code", "message"}}.
//
// Contract:
// - parse_batch_request() throws ns::Error(invalid_input) with the reason,
//   naming the field by its path ("body.temperature"); parse_batch_jsonl()
//   never throws for bad lines: it keeps every valid line and reports each
//   invalid one with its line number, so one typo does not stop a batch.
// - Body fields absent (or null) take their value from `defaults` (the submit
//   command's sampling flags); the result is checked with SamplingParams::validate().
// - n, logprobs and top_logprobs are honoured (SamplingParams::n, logprobs,
//   top_logprobs); on /v1/completions `logprobs` is OpenAI's legacy integer
//   (k alternatives; true/false also accepted), on chat a boolean.
// - Fields that would change the output if ignored (best_of > 1, echo,
//   presence_penalty != 0, images, a forced tool_choice, ...) are rejected, not dropped.
// - tools, tool_choice "auto"/"none", assistant tool_calls, tool results and
//   reasoning_content are kept with the conversation for the model's template.
// - body.response_format {"type": "json_object"} or {"type": "json_schema",
//   "json_schema": {"schema": ...}} and body.grammar (GBNF) become
//   sampling.grammar (engine/grammar/): a schema is compiled once per distinct
//   text, in its own key order; its problems are named by path
//   ("body.response_format.json_schema.schema.properties.x.format: ...").
// - Logprobs come out in OpenAI's shapes (chat_logprobs_json,
//   completion_logprobs_json); a -inf logprob is written as -9999.0, as
//   OpenAI does.
// - Output lines are single-line JSON; text that is not valid UTF-8 (a
//   generation cut inside a character) has the bad bytes replaced by U+FFFD.
// Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/chat/chat_template.h"
#include "engine/chat/tool_calls.h"
#include "engine/sampler/logprobs.h"
#include "common/sampling_params.h"

namespace ns::cli {

enum class BatchEndpoint { completions, chat_completions };
const char* endpoint_url(BatchEndpoint e);  // "/v1/completions", "/v1/chat/completions"

// One valid input line.
struct BatchRequest {
  int64_t line = 0;       // 1-based line number in the input (0 for parse_batch_request)
  std::string custom_id;  // non-empty, unique within the input
  BatchEndpoint endpoint = BatchEndpoint::completions;
  std::string model;                        // body.model; "" when absent (the submit command's --model applies)
  std::string prompt;                       // /v1/completions: the prompt, non-empty
  std::vector<chat::ChatMessage> messages;  // /v1/chat/completions: the conversation, non-empty
  std::string tools;                        // the tools offered (JSON array text, key order kept); "" = none
  SamplingParams sampling;                  // defaults overridden by the body; valid

  bool is_chat() const { return endpoint == BatchEndpoint::chat_completions; }
};

// One invalid input line.
struct BatchLineError {
  int64_t line = 0;       // 1-based
  std::string custom_id;  // as far as it could be read; "" otherwise
  std::string message;    // the reason, e.g. "body.max_tokens = 0 is invalid: must be in 1..1000000"
};

struct BatchInput {
  std::vector<BatchRequest> requests;  // valid lines, in file order
  std::vector<BatchLineError> errors;  // invalid lines, in file order
  int64_t lines = 0;                   // non-blank lines read (requests + errors)
};

// One line (without its newline).
BatchRequest parse_batch_request(std::string_view line, const SamplingParams& defaults);

// A whole JSONL text: lines split on "\n" (a trailing "\r" and a leading UTF-8
// BOM are ignored), blank lines skipped. A custom_id already used by an earlier
// valid line makes the later line invalid.
BatchInput parse_batch_jsonl(std::string_view text, const SamplingParams& defaults);

// "line 7 (custom_id \"req-7\"): <reason>", for the submit command's report.
std::string describe(const BatchLineError& error);
// The report's lines, each reason said once: lines sharing a reason become
// "lines 1-3, 7 (4 lines): <reason>" (one mistake in a 500-line file is one
// line, not 500); a reason of one line is describe(). In first-seen order.
std::vector<std::string> describe_once(const std::vector<BatchLineError>& errors);

// Choice k > 0 of a job with n > 1.
struct BatchChoice {
  std::string text;
  std::string finish_reason;
};

// A finished job, as the export writes it.
struct BatchSuccess {
  int64_t job_id = 0;  // the queue's job id: ids in the line are derived from it
  std::string custom_id;
  BatchEndpoint endpoint = BatchEndpoint::completions;
  std::string model;           // the model that ran the job
  int64_t created_unix_s = 0;  // when the job finished, seconds since the epoch
  std::string text;            // the completion (stop strings already removed)
  std::string finish_reason;   // "stop" or "length"
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;          // every choice's, summed
  std::vector<BatchChoice> more_choices;  // choices 1..n-1
  std::string logprobs;                   // the job's stored records (engine/sampler/logprobs.h); "" = "logprobs": null
  // The request offered tools and the model writes calls in this markup: each choice's text is split into
  // content, reasoning_content and tool_calls (engine/chat/tool_calls.h); finish_reason "tool_calls" when it
  // called one.
  std::optional<chat::ToolCallFormat> tool_format;
  // A cancelled job's partial output: the line's `error` ({code, message}) beside the response.
  std::string error_code, error_message;
};

// One choice's logprobs in OpenAI's chat shape:
//   {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}]}
// `token` is the token's text (bytes of a partial UTF-8 character as U+FFFD),
// `bytes` its exact UTF-8 bytes.
nlohmann::ordered_json chat_logprobs_json(const sampler::ChoiceLogprobs& c, const sampler::TokenPieces& pieces);
// In OpenAI's legacy completions shape:
//   {"tokens": [text], "token_logprobs": [lp], "top_logprobs": [{text: lp}], "text_offset": [n]}
// text_offset[i]: the characters (UTF-8 lead bytes) of the tokens before token
// i, counted from the start of the completion.
nlohmann::ordered_json completion_logprobs_json(const sampler::ChoiceLogprobs& c, const sampler::TokenPieces& pieces);

// A job that did not produce a completion (failed, cancelled).
struct BatchFailure {
  int64_t job_id = 0;
  std::string custom_id;
  std::string code;     // e.g. the job's error kind ("invalid_input", "bad_model") or "cancelled"
  std::string message;  // the job's error message
};

// One output line each, without a trailing newline.
std::string format_batch_success(const BatchSuccess& s);
std::string format_batch_failure(const BatchFailure& f);

}  // namespace ns::cli
