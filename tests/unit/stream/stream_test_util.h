// Helpers for the streaming tests: a scratch directory in the build tree (a
// real disk filesystem, so O_DIRECT is exercised; tmpfs refuses it), files of
// known bytes, aligned buffers, a small MoE-shaped GGUF, every reader mode with
// every cache policy.
#pragma once

#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/gguf/gguf_writer.h"
#include "engine/stream/cache_index.h"
#include "engine/stream/reader.h"
#include "tests/unit/jobs/temp_dir.h"

namespace stream_test {

class ScratchDir : public ns::test::TempDir {
 public:
  ScratchDir() : TempDir(NS_BINARY_DIR) {}
};

// Runs body(mode, policy) for both reader modes and both cache policies, their names captured.
template <class Body>
void for_each_mode_and_policy(Body&& body) {
  for (ns::stream::IoMode mode : {ns::stream::IoMode::uring, ns::stream::IoMode::pread}) {
    for (ns::stream::CachePolicy policy : {ns::stream::CachePolicy::lru, ns::stream::CachePolicy::lfu}) {
      const std::string mode_name = ns::stream::io_mode_name(mode);
      CAPTURE(mode_name);
      const std::string policy_name = ns::stream::cache_policy_name(policy);
      CAPTURE(policy_name);
      body(mode, policy);
    }
  }
}

// The byte at `offset` of a pattern file: a hash, so misplaced bytes show.
inline uint8_t pattern_byte(uint64_t offset, uint64_t seed) {
  uint64_t z = offset + seed * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return static_cast<uint8_t>(z ^ (z >> 31));
}

inline void write_pattern_file(const std::string& path, uint64_t size, uint64_t seed) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot create " + path);
  std::vector<uint8_t> buf(1 << 16);
  for (uint64_t at = 0; at < size;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), size - at));
    for (size_t i = 0; i < n; ++i) buf[i] = pattern_byte(at + i, seed);
    if (::write(fd, buf.data(), n) != static_cast<ssize_t>(n)) throw std::runtime_error("short write to " + path);
    at += n;
  }
  ::close(fd);
}

inline std::vector<uint8_t> pread_bytes(const std::string& path, uint64_t offset, uint64_t length) {
  std::vector<uint8_t> out(length);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + path);
  uint64_t got = 0;
  while (got < length) {
    const ssize_t r = ::pread(fd, out.data() + got, length - got, static_cast<off_t>(offset + got));
    if (r <= 0) break;
    got += static_cast<uint64_t>(r);
  }
  ::close(fd);
  out.resize(got);
  return out;
}

struct AlignedFree {
  void operator()(uint8_t* p) const { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<uint8_t[], AlignedFree>;
inline AlignedBuffer aligned_buffer(uint64_t bytes) {
  return AlignedBuffer(static_cast<uint8_t*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096)));
}

// A GGUF shaped like a small MoE model: a dense layer 0, then MoE layers with
// n_expert experts whose Q8_0 stacks have rows that are not 4096-byte multiples,
// so expert offsets fall at odd places. Tensor bytes are pattern bytes of
// their file offset, so any misplaced read shows.
struct TinyMoe {
  uint32_t n_layer = 3, n_expert = 8, n_embd = 96, n_ff = 50;
};

// The routed stacks of a file these tests write: its 3-D tensors (the files
// have no other). The engine takes them from the architecture's table
// (Model::routed_tensors); these files have no architecture to ask.
inline std::vector<ns::gguf::TensorInfo> stacks_of(const std::vector<ns::gguf::TensorInfo>& tensors) {
  std::vector<ns::gguf::TensorInfo> out;
  for (const auto& t : tensors)
    if (t.dims.size() == 3) out.push_back(t);
  return out;
}

inline void write_tiny_moe(const std::string& path, const TinyMoe& m = {}) {
  using ns::gguf::GgmlType;
  ns::gguf::GgufWriter w;
  w.set("general.architecture", ns::gguf::val::str("llama"));
  w.add_tensor("token_embd.weight", {m.n_embd, 40}, GgmlType::Q8_0);
  for (uint32_t l = 0; l < m.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    w.add_tensor(p + "attn_norm.weight", {m.n_embd}, GgmlType::F32);
    if (l == 0) {
      w.add_tensor(p + "ffn_gate.weight", {m.n_embd, m.n_ff}, GgmlType::Q8_0);
      continue;
    }
    w.add_tensor(p + "ffn_gate_inp.weight", {m.n_embd, m.n_expert}, GgmlType::F32);
    w.add_tensor(p + "ffn_gate_exps.weight", {m.n_embd, m.n_ff, m.n_expert}, GgmlType::Q8_0);
    w.add_tensor(p + "ffn_up_exps.weight", {m.n_embd, m.n_ff, m.n_expert}, GgmlType::Q8_0);
    // Q8_0 rows are whole 32-element blocks: down's input width is n_ff rounded up.
    w.add_tensor(p + "ffn_down_exps.weight", {(m.n_ff + 31) / 32 * 32, m.n_embd, m.n_expert}, GgmlType::Q8_0);
  }
  w.open(path);
  for (size_t i = 0; i < w.n_tensors(); ++i) {
    const ns::gguf::TensorInfo t = w.tensor(i);
    std::vector<uint8_t> bytes(t.nbytes);
    for (uint64_t j = 0; j < t.nbytes; ++j) bytes[j] = pattern_byte(t.offset + j, 7);
    w.write_data(bytes);
  }
  w.close();
}

}  // namespace stream_test
