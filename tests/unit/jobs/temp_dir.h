// A fresh directory under $TMPDIR (or /tmp, or a folder of the caller's) for
// one test, removed with its contents afterwards; and a file's bytes written
// and read whole.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

namespace ns::test {

class TempDir {
 public:
  TempDir() : TempDir(default_parent()) {}
  explicit TempDir(const std::string& parent) {
    std::string tmpl = parent + "/nightshift-test-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + tmpl);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  static std::string default_parent() {
    const char* base = std::getenv("TMPDIR");
    return base != nullptr && *base != '\0' ? base : "/tmp";
  }
  std::filesystem::path path_;
};

// Writes `bytes` to `path`, creating its folders.
inline void write_file(const std::filesystem::path& path, const std::string& bytes) {
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

// Writes each (path under `dir`, bytes), creating the folders.
inline void write_files(const std::filesystem::path& dir,
                        std::initializer_list<std::pair<std::string, std::string>> files) {
  for (const auto& [name, bytes] : files) write_file(dir / name, bytes);
}

// The whole file ("" when it cannot be read).
inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace ns::test
