// `nightshift submit --dir DOCS`: one continuation job per document in a
// folder (docs/nightly-continuation.md).
//
// Contract:
// - Documents are the regular files under the folder, at any depth, whose
//   name matches one of the globs (fnmatch; a glob with a '/' is matched
//   against the path relative to the folder). Hidden files and folders
//   (".name") and the files `export --dir` writes ("*.continued.*") are
//   never documents, so exporting into the documents' folder is safe.
// - Symbolic links (to files or folders) are skipped and named in
//   `skipped_symlinks`, so a link cannot queue a file from outside the folder
//   (under the nightly service: /etc/nightshift/config.yaml with a database
//   password) unless follow_symlinks (`--follow-symlinks`) says they belong.
// - A job's prompt is the document's text; source_path is the file's
//   absolute path; custom_id is "<relative path>@<first 16 hex digits of the
//   SHA-256 of the text>", which names the document and its version (export
//   --dir takes the name back from it).
// - Idempotent per file content: the key is "<batch>:<relative path>:<the
//   same 16 hex digits>" (what sha256sum prints, cut), so a rerun
//   queues only documents that are new or changed; an edited document gets a
//   new job (the old one stays, and export writes the newest).
// - submit_documents reads each document relative to the folder's
//   descriptor, opened once, one path component at a time with O_NOFOLLOW
//   (unless follow_symlinks), and checks the opened file (fstat: a regular
//   file) rather than its path: a file swapped for a link (or a folder for a
//   link) after find_documents listed it is refused, not read.
// - A document that cannot be queued (unreadable, empty, not UTF-8, too
//   long, swapped for a link or not a regular file) is reported with its
//   reason; the others are queued anyway.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "jobs/queue.h"

namespace ns::cli {

inline const std::vector<std::string> kDefaultDocumentGlobs = {"*.md", "*.txt"};

struct Document {
  std::string relative_path;  // '/'-separated, relative to the folder
  std::filesystem::path path;
  std::filesystem::path folder;  // the folder find_documents read (relative_path is below it)
  bool follow_symlinks = false;  // what find_documents was told
};

// Sorted by relative path. Throws ns::Error(invalid_input) when `dir` is not
// a readable folder. Skipped links go to *skipped_symlinks (relative paths,
// sorted) when it is given.
std::vector<Document> find_documents(const std::filesystem::path& dir, const std::vector<std::string>& globs,
                                     bool follow_symlinks = false,
                                     std::vector<std::string>* skipped_symlinks = nullptr);

// "notes/one.md@3f2a9c1e4b5d6e7f" for the document's text.
std::string document_custom_id(const std::string& relative_path, std::string_view text);
// The relative path back from a custom_id of that form; "" when it is not one.
std::string document_name(const std::string& custom_id);

struct DocumentOutcome {
  std::string relative_path;
  int64_t id = 0;        // 0 when not queued
  bool created = false;  // false: queued by an earlier run (or not at all)
  std::string problem;   // why it was not queued; "" when it was
  bool empty = false;    // the problem is only that it has no text yet: a warning, not an error
};

struct DocumentSubmitReport {
  std::vector<DocumentOutcome> documents;  // in find_documents order
  int64_t created() const;
  int64_t already() const;
  int64_t rejected() const;
};

// `base` carries model, sampling, priority and max_attempts; `batch` must be set.
DocumentSubmitReport submit_documents(jobs::Queue& queue, const std::vector<Document>& documents,
                                      const jobs::JobSpec& base, const std::string& batch);

// The batch a folder gives when --batch is not: the folder's own name
// ("/srv/notes/" -> "notes").
std::string batch_name_from_dir(const std::filesystem::path& dir);

}  // namespace ns::cli
