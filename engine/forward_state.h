// Activations of one forward pass over a batch of tokens, allocated once at
// load for the largest batch so the token loop never allocates.
// Shapes are [max_batch][width] row-major; only the first n rows are live.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/kernels/kernels.h"

namespace ns {

class ThreadPool;
class KvCache;

struct ForwardState {
  int64_t n = 0;            // tokens in this batch
  int64_t pos0 = 0;         // position of the first one
  int64_t max_batch = 0;

  std::vector<float> x;     // [B][n_embd] residual stream
  std::vector<float> xn;    // [B][n_embd] normed input of the current block
  std::vector<float> out;   // [B][n_embd] output of the current block
  std::vector<float> q, k, v, att;  // attention: [B][n_head*head_dim], [B][kv dims], [B][n_head*v_head_dim]
  std::vector<float> ff_a, ff_b;    // [B][n_ff] FFN hidden (gate, up)
  std::vector<uint16_t> q16;        // [threads][head_dim] one query head in F16

  // MoE routing and expert-major gather buffers.
  std::vector<float> router;        // [B][n_expert]
  std::vector<int32_t> chosen;      // [B][n_used] expert ids
  std::vector<float> chosen_w;      // [B][n_used] their weights
  std::vector<int32_t> expert_count, expert_first, expert_rows;  // counting sort of (token, slot) by expert
  std::vector<float> ex_in, ex_a, ex_b, ex_out;                  // [B][...] one expert's tokens

  ThreadPool* pool = nullptr;
  KvCache* kv = nullptr;
  kernels::MatmulScratch mm;
};

}  // namespace ns
