// SHA-256 against the FIPS 180-2 / NIST example vectors, and the incremental
// interface against one-shot digests at every split (including the padding
// boundaries at 55, 56 and 64 bytes).
#include <doctest/doctest.h>

#include <string>

#include "daemon/cli/sha256.h"

using ns::cli::Sha256;
using ns::cli::sha256_hex;

namespace {

std::string hex(const std::array<uint8_t, 32>& d) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (uint8_t b : d) s += kHex[b >> 4], s += kHex[b & 15];
  return s;
}

}  // namespace

TEST_CASE("SHA-256 of the NIST example messages") {
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(sha256_hex(
            "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstn"
            "opqrstu") == "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  CHECK(sha256_hex(std::string(1000000, 'a')) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("SHA-256 at the padding boundaries (values from sha256sum)") {
  // 55 bytes: the length fits the last block; 56: it needs one more; 64: a whole block of message.
  CHECK(sha256_hex(std::string(55, 'a')) == "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  CHECK(sha256_hex(std::string(56, 'a')) == "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  CHECK(sha256_hex(std::string(64, 'a')) == "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
  CHECK(sha256_hex(std::string(119, 'a')) == "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb");
}

TEST_CASE("SHA-256 fed in pieces equals the one-shot digest, at every split and length around a block") {
  std::string message;
  for (int i = 0; i < 200; ++i) message += static_cast<char>((i * 37 + 11) & 0xFF);  // every byte value class, NULs too
  for (size_t length : {0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129, 200}) {
    const std::string m = message.substr(0, length);
    const std::string whole = sha256_hex(m);
    for (size_t split = 0; split <= length; ++split) {
      Sha256 h;
      h.update(std::string_view(m).substr(0, split)).update(std::string_view(m).substr(split));
      REQUIRE_MESSAGE(hex(h.finish()) == whole, "length " << length << ", split at " << split);
    }
  }
  // One byte at a time across the million-a vector's first blocks.
  Sha256 h;
  for (int i = 0; i < 1000; ++i) h.update("a");
  CHECK(hex(h.finish()) == sha256_hex(std::string(1000, 'a')));
  CHECK(sha256_hex("abd") != sha256_hex("abc"));
}
