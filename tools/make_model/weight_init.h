// Random weights for generated models, one row at a time.
//
// Contract: a row's values depend only on (seed, tensor name, row index, init),
// never on the order or the thread that generates it, so rows can be produced
// in parallel and streamed, and equal flags + seed give byte-identical files.
// The numbers come from a counter-based generator (splitmix64 over the row's
// key) and only exact float arithmetic (no libm), so they are the same on
// every machine.
//
// Values are zero-mean by construction: "normal" rows are symmetric and then
// centred (each row sums to zero before quantization), so a quantized model has
// no bias common to every token that would make every router pick the same
// experts (tests/bench/README.md, "Honest benchmark models").
#pragma once

#include <cstdint>
#include <string_view>

namespace ns::make_model {

struct Init {
  enum class Kind {
    normal,  // zero-mean, standard deviation `scale`, each row centred
    norm,    // normalization weights: 1 + scale * noise
  };
  Kind kind = Kind::normal;
  float scale = 1.0f;
};

// 64-bit key of a tensor name (FNV-1a): tensors keep their values when other
// tensors are added or removed (e.g. --tied-output) or change type.
uint64_t tensor_key(std::string_view name);

// Fills out[0..n) with row `row` of the tensor keyed `key`.
void fill_row(uint64_t seed, uint64_t key, uint64_t row, const Init& init, float* out, int64_t n);

// Writes row `row` of an MXFP4 tensor keyed `key` as uniformly random codes
// (n / 32 blocks of 17 bytes) under one exponent that gives the codes the
// standard deviation of a `normal` row of init.scale (a power of two away at
// most): sign-symmetric, so zero-mean like fill_row's rows, and ~30x cheaper
// than quantizing one (no level search). For multi-GiB bench models
// (nightshift-make-model --random-expert-codes). Same (seed, key, row): same bytes.
void fill_mxfp4_codes(uint64_t seed, uint64_t key, uint64_t row, const Init& init, uint8_t* out, int64_t n);

}  // namespace ns::make_model
