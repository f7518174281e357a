// Helpers shared by the writer tests: a scratch directory and file reading.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/unit/jobs/temp_dir.h"

namespace writer_test {

// A fresh directory under the system temp dir, removed with its contents at scope exit.
using ScratchDir = ns::test::TempDir;

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace writer_test
