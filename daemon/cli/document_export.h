// `nightshift export --dir OUT`: each finished document's continuation as a
// file named after its source (docs/nightly-continuation.md).
//
// Contract:
// - The documents are the jobs `submit --dir` queued (custom_id
//   "<relative path>@<hash>", no source line), of one batch or of all.
// - The document "notes/one.md" is written to OUT/notes/one.continued.md
//   (the relative path mirrored under OUT, ".continued" before the
//   extension). When a document was submitted in several versions (it was
//   edited), its newest job decides: done -> written; failed, dead or
//   cancelled -> reported; queued or running -> pending, the file is left as
//   it is. Older versions are counted as superseded.
// - Files are written whole (a temporary file renamed into place), mode
//   0600, never through a symbolic link: OUT is opened once and every file
//   and subfolder is reached from it with O_NOFOLLOW (output_file.h); a link
//   in the way is reported as a problem, not followed. A file that already
//   holds the same text is not rewritten.
// - A name that would escape OUT (absolute, "..") is refused, not written.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "jobs/queue.h"

namespace ns::cli {

// "notes/one.md" -> "notes/one.continued.md"; "README" -> "README.continued".
std::string continued_name(const std::string& relative_path);

struct DocumentExportOptions {
  std::string batch;           // "" = documents of every batch (newest job per name wins)
  bool with_document = false;  // write the document's text followed by the continuation
};

struct DocumentExportProblem {
  std::string name;  // the document's relative path
  int64_t job_id = 0;
  std::string message;  // "failed: io: ..." etc.
};

struct DocumentExportReport {
  std::vector<std::string> written;  // relative output paths
  int64_t unchanged = 0;             // already held the same text
  int64_t pending = 0;               // newest version queued or running
  int64_t superseded = 0;            // older versions of a document
  std::vector<DocumentExportProblem> problems;
};

DocumentExportReport export_documents(jobs::Queue& queue, const std::filesystem::path& out_dir,
                                      const DocumentExportOptions& options);

}  // namespace ns::cli
