// Files the CLI writes for its user (`export --jsonl`, `export --dir`):
// written whole under a temporary name and renamed into place, never through
// a symbolic link, readable by their owner only.
//
// Contract:
// - An OutputFolder holds its folder open by descriptor: every file and
//   subfolder below it is reached relative to that descriptor, one path
//   component at a time with O_NOFOLLOW, so a link planted in the folder
//   (or a subfolder swapped for one) is refused, not followed. The folder
//   the user named is opened as given (a link the user names is theirs).
// - An OutputFile is created in its folder as ".<name>.tmp-<random>" with
//   O_CREAT|O_EXCL|O_NOFOLLOW (a name taken, by a planted link or anything
//   else, is never opened: another random name is tried), mode 0600
//   whatever the umask (results may hold what the database holds, which is
//   0600 too). commit() renames it over <name>: renameat replaces a link
//   at <name> rather than writing through it. A file not committed is
//   removed when the OutputFile goes.
// - Failures throw ns::Error(io) naming the path and the reason.
#pragma once

#include <filesystem>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>

namespace ns::cli {

class OutputFolder {
 public:
  // Opens `dir`, creating it (and its parents) when absent.
  explicit OutputFolder(const std::filesystem::path& dir);
  // The subfolder `relative` ('/'-separated, no "..", no leading '/'),
  // created (mode 0700) component by component when absent; a component
  // that is a link is refused.
  OutputFolder subfolder(const std::string& relative) const;
  ~OutputFolder();
  OutputFolder(OutputFolder&& other) noexcept;
  OutputFolder& operator=(OutputFolder&&) = delete;
  OutputFolder(const OutputFolder&) = delete;

  int fd() const { return fd_; }
  const std::filesystem::path& path() const { return path_; }
  // Whether `name` in this folder is a regular file (not a link) holding exactly `text`.
  bool holds(const std::string& name, std::string_view text) const;

 private:
  OutputFolder(int fd, std::filesystem::path path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::filesystem::path path_;
};

class OutputFile {
 public:
  // A new temporary file in `folder` (which must outlive this), renamed to `name` by commit().
  OutputFile(const OutputFolder& folder, std::string name);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // Writes through a buffer; errors surface at commit().
  std::ostream& stream();
  void write(std::string_view text) { stream().write(text.data(), static_cast<std::streamsize>(text.size())); }
  // Flushes, syncs, closes and renames the file into place.
  void commit();

 private:
  class Buf;
  const OutputFolder& folder_;
  std::string name_, tmp_;
  int fd_ = -1;
  std::unique_ptr<Buf> buf_;
  std::unique_ptr<std::ostream> out_;
};

// A whole file in one call: OutputFile + write + commit.
void write_output_file(const OutputFolder& folder, const std::string& name, std::string_view text);

}  // namespace ns::cli
