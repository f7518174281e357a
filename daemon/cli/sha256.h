// SHA-256 (FIPS 180-4), for content fingerprints: the idempotency keys of
// `submit --dir` (a document's bytes) and `submit --jsonl` (a request's
// content), so a rerun queues nothing twice and a changed input is new work.
// Not used for security; SHA-256 because it is well known and `sha256sum`
// lets a user check a key by hand.
//
// Contract: pure functions, thread-safe; incremental use gives the same digest
// as one call over the concatenation.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace ns::cli {

class Sha256 {
 public:
  Sha256();
  Sha256& update(std::string_view bytes);
  // The digest; the object must not be updated afterwards.
  std::array<uint8_t, 32> finish();

 private:
  void compress(const uint8_t* block);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

// Lowercase hex of the digest of `bytes` (64 characters, as sha256sum prints).
std::string sha256_hex(std::string_view bytes);

}  // namespace ns::cli
