#include "daemon/cli/document_export.h"

#include <map>
#include <optional>

#include "daemon/cli/document_submit.h"
#include "daemon/cli/output_file.h"
#include "common/error.h"

namespace ns::cli {
namespace fs = std::filesystem;
namespace {

bool escapes(const fs::path& relative) {
  if (relative.empty() || relative.is_absolute() || relative.has_root_name()) return true;
  for (const fs::path& part : relative) {
    if (part == "..") return true;
  }
  return false;
}

}  // namespace

std::string continued_name(const std::string& relative_path) {
  const fs::path p(relative_path);
  const std::string ext = p.extension().string();
  const std::string stem = p.stem().string();
  const std::string name = stem + ".continued" + ext;
  return p.has_parent_path() ? (p.parent_path() / name).generic_string() : name;
}

DocumentExportReport export_documents(jobs::Queue& queue, const fs::path& out_dir,
                                      const DocumentExportOptions& options) {
  jobs::ListFilter filter;
  filter.batch = options.batch;
  filter.limit = 0;
  filter.order = jobs::ListFilter::Order::oldest_first;
  // Oldest first, so a later version (higher id) replaces an earlier one.
  std::map<std::string, jobs::Job> newest;
  DocumentExportReport report;
  for (jobs::Job& job : queue.list(filter)) {
    if (!jobs::is_document_job(job.spec)) continue;  // JSONL lines, plain submits
    const std::string name = document_name(job.spec.custom_id);
    if (name.empty()) continue;
    auto [it, inserted] = newest.try_emplace(name, job);
    if (!inserted) {
      ++report.superseded;
      it->second = std::move(job);
    }
  }
  std::optional<OutputFolder> root;  // opened at the first file to write
  for (const auto& [name, job] : newest) {
    switch (job.state) {
      case jobs::JobState::queued:
      case jobs::JobState::running: ++report.pending; continue;
      case jobs::JobState::failed:
      case jobs::JobState::dead:
      case jobs::JobState::cancelled: {
        std::string message = jobs::state_name(job.state);
        if (!job.error.empty()) message += ": " + (job.error_kind.empty() ? "" : job.error_kind + ": ") + job.error;
        // Only finished continuations become files; a cancelled job's partial one is named, not dropped unsaid.
        if (job.result && job.result->completion_tokens > 0)
          message += "; its partial continuation (" + std::to_string(job.result->completion_tokens) +
                     " tokens) is not written: nightshift show " + std::to_string(job.id) + " --full";
        report.problems.push_back({name, job.id, message});
        continue;
      }
      case jobs::JobState::done: break;
    }
    const std::string output = continued_name(name);
    if (escapes(fs::path(output))) {
      report.problems.push_back(
          {name, job.id, "its name would be written outside " + out_dir.string() + "; not written"});
      continue;
    }
    std::string text = job.result ? job.result->text : "";
    if (options.with_document) text = job.spec.prompt + text;
    // Every file is reached from OUT's descriptor, a component at a time,
    // never through a link (output_file.h).
    if (!root) root.emplace(out_dir);
    const fs::path relative(output);
    try {
      const OutputFolder folder = root->subfolder(relative.parent_path().generic_string());
      const std::string file = relative.filename().string();
      if (folder.holds(file, text)) {
        ++report.unchanged;
        continue;
      }
      write_output_file(folder, file, text);
    } catch (const Error& e) {
      report.problems.push_back({name, job.id, std::string("not written: ") + e.what()});
      continue;
    }
    report.written.push_back(output);
  }
  return report;
}

}  // namespace ns::cli
