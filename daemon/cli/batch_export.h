// `nightshift export --batch NAME --jsonl OUT`: a batch's finished jobs as
// OpenAI Batch output lines (docs/batch-jsonl.md).
//
// Contract: one line per finished job, in input order (source line, then id):
// done jobs as a response with choices and usage; failed, dead and cancelled
// jobs as an `error` line (code = the job's error kind, or "cancelled"); a job
// cancelled after it began its output has its partial response beside that
// error (finish_reason "cancelled").
// Queued and running jobs are counted and left out (export again later).
// Reads only; the queue is not changed.
#pragma once

#include <functional>
#include <optional>

#include <cstdint>
#include <ostream>
#include <string>

#include "daemon/cli/openai_batch.h"
#include "jobs/queue.h"

namespace ns::cli {

struct ExportCounts {
  jobs::QueueCounts states;  // every job of the batch, by state
  int64_t written = 0;       // lines written
  int64_t errors = 0;        // of which error lines
  int64_t pending() const { return states.queued + states.running; }
};

// The tool-call markup a model writes (from its chat template), by model name; nullopt when unknown.
using ToolFormatOf = std::function<std::optional<chat::ToolCallFormat>(const std::string& model)>;

// The output line of one finished job; "" for a job not finished. A chat job that offered tools has its
// reply split into content and tool_calls when `tool_format` knows its model's markup.
std::string batch_output_line(const jobs::Job& job, const ToolFormatOf& tool_format = {});

ExportCounts export_batch_jsonl(jobs::Queue& queue, const std::string& batch, std::ostream& out,
                                const ToolFormatOf& tool_format = {});

// "3 done, 1 failed, 0 cancelled, 0 dead, 2 queued, 0 running".
std::string describe_counts(const jobs::QueueCounts& c);

}  // namespace ns::cli
