#include "daemon/cli/document_submit.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <span>

#include "daemon/cli/sha256.h"
#include "common/error.h"

namespace ns::cli {
namespace fs = std::filesystem;
namespace {

constexpr size_t kChunk = 200;  // jobs per transaction
constexpr const char* kExportInfix = ".continued";
// 64 bits of the content's SHA-256: enough to tell versions of a document apart.
constexpr size_t kHashDigits = 16;

bool matches(const std::string& glob, const std::string& relative_path, const std::string& name) {
  if (glob.find('/') != std::string::npos) return fnmatch(glob.c_str(), relative_path.c_str(), FNM_PATHNAME) == 0;
  return fnmatch(glob.c_str(), name.c_str(), 0) == 0;
}

// export --dir writes "name.continued.md" (".continued" before the last
// extension, or at the end); such a file is output, not input.
bool is_export_output(const std::string& name) {
  const size_t at = name.rfind(kExportInfix);
  if (at == std::string::npos) return false;
  const std::string_view rest = std::string_view(name).substr(at + std::strlen(kExportInfix));
  return rest.empty() || (rest[0] == '.' && rest.find('.', 1) == std::string_view::npos);
}

// A folder held open by descriptor, so each document is reached from it and
// not from a path that can change between listing and reading.
class FolderHandle {
 public:
  FolderHandle() = default;
  FolderHandle(const FolderHandle&) = delete;
  FolderHandle& operator=(const FolderHandle&) = delete;
  ~FolderHandle() { reset(); }
  // Opens `dir` unless it is the one already open; the problem in `problem`.
  int open(const fs::path& dir, std::string& problem) {
    if (fd_ >= 0 && dir == path_) return fd_;
    reset();
    fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd_ < 0) problem = "cannot open the folder " + dir.string() + ": " + std::strerror(errno);
    path_ = dir;
    return fd_;
  }

 private:
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int fd_ = -1;
  fs::path path_;
};

// Opens doc.relative_path below the folder's descriptor, one component at a
// time, O_NOFOLLOW unless links were asked for; -1 with `problem` set.
int open_document(int folder_fd, const Document& doc, std::string& problem) {
  const int nofollow = doc.follow_symlinks ? 0 : O_NOFOLLOW;
  int fd = folder_fd;
  size_t start = 0;
  for (;;) {
    const size_t slash = doc.relative_path.find('/', start);
    const bool last = slash == std::string::npos;
    const std::string part = doc.relative_path.substr(start, last ? std::string::npos : slash - start);
    // O_NONBLOCK: a FIFO swapped in is not waited on (fstat refuses it next).
    const int flags =
        last ? (O_RDONLY | O_NONBLOCK | O_CLOEXEC | nofollow) : (O_RDONLY | O_DIRECTORY | O_CLOEXEC | nofollow);
    const int next = (part.empty() || part == "..") ? -1 : ::openat(fd, part.c_str(), flags);
    const int err = part.empty() || part == ".." ? EINVAL : errno;
    if (fd != folder_fd) ::close(fd);
    if (next < 0) {
      if (err == ELOOP || (err == ENOTDIR && !last)) {
        problem =
            "it is (or is under) a symbolic link now, not the file the folder listed; not read "
            "(--follow-symlinks reads links)";
      } else {
        problem = std::string("cannot read it: ") + std::strerror(err);
      }
      return -1;
    }
    if (last) return next;
    fd = next;
    start = slash + 1;
  }
}

std::string read_document(int folder_fd, const Document& doc, std::string& problem) {
  const int fd = open_document(folder_fd, doc, problem);
  if (fd < 0) return {};
  std::string text;
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    problem = std::string("cannot read it: ") + std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    problem = "it is not a regular file now (replaced since the folder was listed); not read";
  } else if (static_cast<uint64_t>(st.st_size) > jobs::kMaxPromptBytes) {
    problem = "it is " + std::to_string(st.st_size) + " bytes; at most " + std::to_string(jobs::kMaxPromptBytes) +
              " bytes (8 MiB) are accepted: split the document";
  } else {
    text.reserve(static_cast<size_t>(st.st_size));
    char buf[65536];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        problem = std::string("cannot read it: ") + std::strerror(errno);
        text.clear();
        break;
      }
      if (n == 0) break;
      text.append(buf, static_cast<size_t>(n));
      if (text.size() > jobs::kMaxPromptBytes) break;  // it grew since fstat: spec_problem says so
    }
  }
  ::close(fd);
  return text;
}

}  // namespace

std::vector<Document> find_documents(const fs::path& dir, const std::vector<std::string>& globs, bool follow_symlinks,
                                     std::vector<std::string>* skipped_symlinks) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw Error(ErrorKind::invalid_input, dir.string() + " is not a folder: --dir takes the folder of documents");
  }
  std::vector<Document> docs;
  std::vector<std::string> skipped;
  fs::recursive_directory_iterator it(
      dir, follow_symlinks ? fs::directory_options::follow_directory_symlink : fs::directory_options::none, ec);
  if (ec) throw Error(ErrorKind::invalid_input, "cannot read the folder " + dir.string() + ": " + ec.message());
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) throw Error(ErrorKind::invalid_input, "cannot read the folder " + dir.string() + ": " + ec.message());
    const std::string name = it->path().filename().string();
    if (name.starts_with(".")) {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    const std::string relative = it->path().lexically_relative(dir).generic_string();
    if (!follow_symlinks && it->is_symlink(ec)) {
      skipped.push_back(relative);
      continue;
    }
    if (!it->is_regular_file(ec) || is_export_output(name)) continue;
    if (std::any_of(globs.begin(), globs.end(), [&](const std::string& g) { return matches(g, relative, name); })) {
      docs.push_back({relative, it->path(), dir, follow_symlinks});
    }
  }
  std::sort(docs.begin(), docs.end(),
            [](const Document& a, const Document& b) { return a.relative_path < b.relative_path; });
  std::sort(skipped.begin(), skipped.end());
  if (skipped_symlinks != nullptr) *skipped_symlinks = std::move(skipped);
  return docs;
}

std::string document_custom_id(const std::string& relative_path, std::string_view text) {
  return relative_path + "@" + sha256_hex(text).substr(0, kHashDigits);
}

std::string document_name(const std::string& custom_id) {
  const size_t at = custom_id.rfind('@');
  if (at == std::string::npos || at == 0 || custom_id.size() - at != kHashDigits + 1) return "";
  if (custom_id.find_first_not_of("0123456789abcdef", at + 1) != std::string::npos) return "";
  return custom_id.substr(0, at);
}

int64_t DocumentSubmitReport::created() const {
  return std::count_if(documents.begin(), documents.end(), [](const DocumentOutcome& d) { return d.created; });
}
int64_t DocumentSubmitReport::already() const {
  return std::count_if(documents.begin(), documents.end(),
                       [](const DocumentOutcome& d) { return d.id != 0 && !d.created; });
}
int64_t DocumentSubmitReport::rejected() const {
  return std::count_if(documents.begin(), documents.end(), [](const DocumentOutcome& d) { return !d.problem.empty(); });
}

DocumentSubmitReport submit_documents(jobs::Queue& queue, const std::vector<Document>& documents,
                                      const jobs::JobSpec& base, const std::string& batch) {
  if (batch.empty()) throw Error(ErrorKind::invalid_input, "the batch needs a name (--batch NAME)");
  DocumentSubmitReport report;
  std::vector<jobs::JobSpec> specs;
  std::vector<size_t> index;  // report.documents position of each spec
  FolderHandle folder;
  for (const Document& doc : documents) {
    DocumentOutcome out;
    out.relative_path = doc.relative_path;
    const int folder_fd = folder.open(doc.folder, out.problem);
    std::string text = folder_fd < 0 ? std::string() : read_document(folder_fd, doc, out.problem);
    if (out.problem.empty() && text.empty()) {
      out.problem = "it is empty";
      out.empty = true;
    }
    if (out.problem.empty()) {
      jobs::JobSpec spec = base;
      spec.batch = batch;
      spec.custom_id = document_custom_id(doc.relative_path, text);
      // "<batch>:<relative path>:<hash>", the key nightly-submit used before
      // `submit --dir` existed, so upgrading queues no document twice.
      spec.idempotency_key =
          batch + ":" + doc.relative_path + ":" + spec.custom_id.substr(spec.custom_id.size() - kHashDigits);
      std::error_code ec;
      const fs::path absolute = fs::absolute(doc.path, ec);
      spec.source_path = (ec ? doc.path : absolute.lexically_normal()).string();
      spec.source_line = 0;
      spec.prompt = std::move(text);
      out.problem = jobs::spec_problem(spec);
      if (out.problem.empty()) {
        specs.push_back(std::move(spec));
        index.push_back(report.documents.size());
      }
    }
    report.documents.push_back(std::move(out));
  }
  for (size_t i = 0; i < specs.size(); i += kChunk) {
    const size_t n = std::min(kChunk, specs.size() - i);
    const std::vector<jobs::SubmitOutcome> outs = queue.submit_many(std::span(specs).subspan(i, n));
    for (size_t k = 0; k < n; ++k) {
      DocumentOutcome& d = report.documents[index[i + k]];
      d.id = outs[k].id;
      d.created = outs[k].created;
    }
  }
  return report;
}

std::string batch_name_from_dir(const fs::path& dir) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(dir, ec), ec);
  if (ec) p = dir;
  std::string name = p.filename().string();
  if (name.empty()) name = p.parent_path().filename().string();  // a trailing '/'
  return name.empty() ? "documents" : name;
}

}  // namespace ns::cli
