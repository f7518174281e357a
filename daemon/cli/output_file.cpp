#include "daemon/cli/output_file.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <streambuf>
#include <system_error>

#include "common/error.h"

namespace ns::cli {
namespace fs = std::filesystem;
namespace {

constexpr mode_t kFileMode = 0600;
constexpr mode_t kFolderMode = 0700;
constexpr int kNameTries = 100;

[[noreturn]] void fail(const std::string& what, int err) {
  throw Error(ErrorKind::io, what + ": " + std::strerror(err));
}

// 16 hex digits from the kernel's random source: a name another user cannot
// plant a link for in advance.
std::string random_suffix() {
  std::array<unsigned char, 8> bytes{};
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::getrandom(bytes.data() + got, bytes.size() - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot name a temporary file", errno);
    }
    got += static_cast<size_t>(n);
  }
  std::string hex;
  for (unsigned char b : bytes) {
    char two[3];
    std::snprintf(two, sizeof two, "%02x", b);
    hex += two;
  }
  return hex;
}

bool plain_component(const std::string& part) {
  return !part.empty() && part != "." && part != ".." && part.find('/') == std::string::npos;
}

}  // namespace

OutputFolder::OutputFolder(const fs::path& dir) : path_(dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(ErrorKind::io, "cannot create the folder " + dir.string() + ": " + ec.message());
  fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0) fail("cannot open the folder " + dir.string(), errno);
}

OutputFolder OutputFolder::subfolder(const std::string& relative) const {
  int fd = ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);  // the result owns a descriptor of its own
  if (fd < 0) fail("cannot open the folder " + path_.string(), errno);
  fs::path path = path_;
  size_t start = 0;
  while (start <= relative.size()) {
    size_t end = relative.find('/', start);
    if (end == std::string::npos) end = relative.size();
    const std::string part = relative.substr(start, end - start);
    start = end + 1;
    if (part.empty() && end == relative.size()) break;  // "" or a trailing '/'
    path /= part;
    if (!plain_component(part)) {
      ::close(fd);
      throw Error(ErrorKind::io, "cannot write under " + path.string() + ": not a plain folder name");
    }
    if (::mkdirat(fd, part.c_str(), kFolderMode) != 0 && errno != EEXIST) {
      const int err = errno;
      ::close(fd);
      fail("cannot create the folder " + path.string(), err);
    }
    const int next = ::openat(fd, part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    const int err = errno;
    ::close(fd);
    if (next < 0) {
      if (err == ELOOP || err == ENOTDIR) {
        throw Error(ErrorKind::io, "cannot write under " + path.string() +
                                       ": it is a link or not a folder (links are not followed; remove it)");
      }
      fail("cannot open the folder " + path.string(), err);
    }
    fd = next;
  }
  return OutputFolder(fd, path);
}

OutputFolder::~OutputFolder() {
  if (fd_ >= 0) ::close(fd_);
}

OutputFolder::OutputFolder(OutputFolder&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) {
  other.fd_ = -1;
}

bool OutputFolder::holds(const std::string& name, std::string_view text) const {
  const int fd = ::openat(fd_, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  bool same = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) == text.size();
  size_t at = 0;
  std::array<char, 65536> buf{};
  while (same && at < text.size()) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || static_cast<size_t>(n) > text.size() - at ||
        std::memcmp(buf.data(), text.data() + at, static_cast<size_t>(n)) != 0) {
      same = false;
      break;
    }
    at += static_cast<size_t>(n);
  }
  ::close(fd);
  return same;
}

// A buffer over the file's descriptor; the first write error is kept for commit().
class OutputFile::Buf : public std::streambuf {
 public:
  explicit Buf(int fd) : fd_(fd) { setp(buf_.data(), buf_.data() + buf_.size()); }
  int error() const { return error_; }

 protected:
  int_type overflow(int_type c) override {
    if (drain() != 0) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  int sync() override { return drain(); }

 private:
  int drain() {
    const char* p = pbase();
    while (p < pptr() && error_ == 0) {
      const ssize_t n = ::write(fd_, p, static_cast<size_t>(pptr() - p));
      if (n < 0) {
        if (errno != EINTR) error_ = errno;
        continue;
      }
      p += n;
    }
    setp(buf_.data(), buf_.data() + buf_.size());
    return error_ == 0 ? 0 : -1;
  }
  int fd_;
  int error_ = 0;
  std::array<char, 65536> buf_{};
};

OutputFile::OutputFile(const OutputFolder& folder, std::string name) : folder_(folder), name_(std::move(name)) {
  if (!plain_component(name_))
    throw Error(ErrorKind::io, "cannot write " + (folder_.path() / name_).string() + ": not a plain file name");
  for (int attempt = 0; fd_ < 0; ++attempt) {
    tmp_ = "." + name_ + ".tmp-" + random_suffix();
    fd_ = ::openat(folder_.fd(), tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, kFileMode);
    if (fd_ < 0 && (errno != EEXIST || attempt + 1 >= kNameTries)) {
      fail("cannot write " + (folder_.path() / tmp_).string(), errno);
    }
  }
  // The umask may have taken bits away, never added them; make it exactly 0600.
  if (::fchmod(fd_, kFileMode) != 0) {
    const int err = errno;
    ::close(fd_);
    ::unlinkat(folder_.fd(), tmp_.c_str(), 0);
    fail("cannot set the mode of " + (folder_.path() / tmp_).string(), err);
  }
  buf_ = std::make_unique<Buf>(fd_);
  out_ = std::make_unique<std::ostream>(buf_.get());
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlinkat(folder_.fd(), tmp_.c_str(), 0);
  }
}

std::ostream& OutputFile::stream() { return *out_; }

void OutputFile::commit() {
  out_->flush();
  const fs::path shown = folder_.path() / name_;
  int err = buf_->error();
  if (err == 0 && ::close(fd_) != 0)
    err = errno;
  else if (err != 0)
    ::close(fd_);
  fd_ = -1;
  if (err == 0 && ::renameat(folder_.fd(), tmp_.c_str(), folder_.fd(), name_.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlinkat(folder_.fd(), tmp_.c_str(), 0);
    fail("cannot write " + shown.string() + (err == ENOSPC ? " (disk full)" : ""), err);
  }
}

void write_output_file(const OutputFolder& folder, const std::string& name, std::string_view text) {
  OutputFile file(folder, name);
  file.write(text);
  file.commit();
}

}  // namespace ns::cli
