// Tracing a forward pass's intermediates by name, for finding where nightshift
// and the reference round apart (issue 34): the names are the reference's graph
// names (ns-ref-dump's NS_REF_TENSORS writes its side, tests/conformance/
// reference/ns_ref_dump.cpp). Set with Model::set_trace_observer; unset, a
// trace point costs one pointer test.
//
// The observer is called on the compute thread with `rows` [n][width] row-major
// (the batch's n tokens; one row for a per-pass value), valid only during the
// call; layer is the block index, -1 for the model's head.
#pragma once

#include <cstdint>
#include <functional>

#include "engine/state/forward_state.h"

namespace ns {

using TraceObserver = std::function<void(const char* name, int64_t layer, const float* rows, int64_t n, int64_t width)>;

inline void trace(const ForwardState& s, const char* name, int64_t layer, const float* rows, int64_t width) {
  if (s.trace_observer != nullptr && *s.trace_observer) (*s.trace_observer)(name, layer, rows, s.n, width);
}

}  // namespace ns
