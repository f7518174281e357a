// The ggml tensor type table: id as stored in GGUF, name, block geometry.
// One row per type; everything that sizes or names a tensor type reads it here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ns::gguf {

// Ids are fixed by the GGUF format (ggml.h's enum ggml_type).
enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
  NVFP4 = 40,
  Q1_0 = 41,
  Q2_0 = 42,
  // nightshift-internal, never in a file (type_traits(id) does not know it):
  // Q4_0 rows interleaved 16 at a time in memory (engine/kernels/repack.h).
  Q4_0_R16 = 63,
};

struct TypeTraits {
  GgmlType type;
  std::string_view name;
  uint32_t block_elems;  // elements per block (1 for plain types)
  uint32_t block_bytes;  // bytes per block
};

// nullopt for ids this build does not know (the reader rejects those tensors)
// and for the internal layouts, which no file may declare.
std::optional<TypeTraits> type_traits(uint32_t type_id);
const TypeTraits& traits(GgmlType t);  // t must be a known type
std::string_view type_name(GgmlType t);

// Bytes for a row of n elements; n must be a multiple of the block size.
inline uint64_t row_bytes(const TypeTraits& tt, uint64_t n) { return n / tt.block_elems * tt.block_bytes; }

}  // namespace ns::gguf
