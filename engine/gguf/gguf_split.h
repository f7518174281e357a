// Writes a model's tensors as a split set, gguf-split's layout: shard i is
// PREFIX-NNNNN-of-MMMMM.gguf (NNNNN = i + 1) with the keys split.no (u16),
// split.count (u16) and split.tensors.count (i32); the first shard carries
// every metadata key of the source, later shards only the split.* keys (and
// general.alignment when the source sets it) and their tensors. Tensors keep
// the source's order, at most max_tensors a shard.
//
// Contract: write_split() returns the shards' paths in order. It throws
// ns::Error(invalid_input) for max_tensors 0 or more than 65535 shards, and
// GgufWriter's errors (io, naming the path) for a shard it cannot write; a
// shard that failed is removed (GgufWriter), the ones before it stay.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "engine/gguf/gguf_set.h"

namespace ns::gguf {

struct SplitOptions {
  size_t max_tensors = 0;            // tensors a shard holds at most (gguf-split --split-max-tensors)
  bool metadata_only_first = false;  // the first shard holds no tensors (gguf-split --no-tensor-first-split)
};

// Writes the tensors and metadata of `source` (a file or a set: its split.*
// keys are replaced) as shards named from `prefix`.
std::vector<std::string> write_split(const GgufSet& source, const std::string& prefix, const SplitOptions& opts);

}  // namespace ns::gguf
