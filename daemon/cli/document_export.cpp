#include "daemon/cli/document_export.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>

#include "daemon/cli/document_submit.h"
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

bool holds(const fs::path& path, const std::string& text) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  const std::string current(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>{});
  return current == text;
}

// A temporary file next to the target, renamed over it: a reader sees the
// old file or the new one, never half of one.
void write_whole(const fs::path& path, const std::string& text) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) throw Error(ErrorKind::io, "cannot create the folder " + path.parent_path().string() + ": " + ec.message());
  const fs::path tmp = path.string() + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(ErrorKind::io, "cannot write " + tmp.string() + ": " + std::strerror(errno));
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.close();
    if (!out) {
      fs::remove(tmp, ec);
      throw Error(ErrorKind::io, "cannot write " + tmp.string() + " (disk full?)");
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw Error(ErrorKind::io, "cannot write " + path.string() + ": " + ec.message());
  }
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
  for (const auto& [name, job] : newest) {
    switch (job.state) {
      case jobs::JobState::queued:
      case jobs::JobState::running:
        ++report.pending;
        continue;
      case jobs::JobState::failed:
      case jobs::JobState::dead:
      case jobs::JobState::cancelled: {
        std::string message = jobs::state_name(job.state);
        if (!job.error.empty()) message += ": " + (job.error_kind.empty() ? "" : job.error_kind + ": ") + job.error;
        report.problems.push_back({name, job.id, message});
        continue;
      }
      case jobs::JobState::done:
        break;
    }
    const std::string output = continued_name(name);
    if (escapes(fs::path(output))) {
      report.problems.push_back({name, job.id, "its name would be written outside " + out_dir.string() + "; not written"});
      continue;
    }
    std::string text = job.result ? job.result->text : "";
    if (options.with_document) text = job.spec.prompt + text;
    const fs::path path = out_dir / fs::path(output);
    if (holds(path, text)) {
      ++report.unchanged;
      continue;
    }
    write_whole(path, text);
    report.written.push_back(output);
  }
  return report;
}

}  // namespace ns::cli
