// libFuzzer target for the GGUF parser: any byte string must either parse or
// throw ns::Error; never crash, hang or read out of bounds (ASan/UBSan watch).
#include <cstddef>
#include <cstdint>

#include "engine/gguf/gguf_file.h"
#include "common/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto f = ns::gguf::GgufFile::parse({data, size}, "fuzz");
    // Touch what a loader would: metadata accessors and every tensor's bytes.
    for (const auto& [key, value] : f.metadata()) (void)f.get_string_or(key == "general.name" ? key : "x", "");
    volatile uint8_t sink = 0;
    for (const auto& t : f.tensors())
      if (t.nbytes) sink = sink ^ f.tensor_data(t)[0] ^ f.tensor_data(t)[t.nbytes - 1];
  } catch (const ns::Error&) {
  }
  return 0;
}
