// What the engine measured of one generation: the figures a job's result
// row stores. Shared by the engine (which fills them), the queue (whose stats
// table, jobs/result_stats.h, names the column each one goes to) and the CLI
// (`nightshift run` prints them).
#pragma once

#include <cstdint>

namespace ns {

struct GenerationStats {
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  double load_ms = 0;  // model load (0 when the model was already loaded)
  double prefill_ms = 0;
  double decode_ms = 0;
  double prefill_tok_s = 0;
  double decode_tok_s = 0;
  uint64_t peak_rss_bytes = 0;      // VmHWM of the process
  uint64_t bytes_read = 0;          // weight bytes read from disk for this generation
  uint64_t kv_bytes_per_token = 0;  // KV cache bytes one token of context takes (all layers)
  // Weight streaming, for this generation (generate(); zeros where nothing was streamed):
  double read_gib_s = 0;         // read rate while reads were in flight
  double io_wait_ms = 0;         // compute blocked waiting for expert reads
  double compute_ms = 0;         // prefill + decode time not spent waiting
  double cache_hit_rate = 0;     // expert cache hits / lookups
  double prefetch_accuracy = 0;  // prefetched experts that were then used / prefetched
  // Batching (GenerationBatch): the forward passes this generation took part
  // in and the mean number of sequences in them (1 when it ran alone). In a
  // batch, bytes_read, io_wait_ms, compute_ms and the read time behind
  // read_gib_s are this generation's share of each step's figures, in
  // proportion to its tokens in the step; cache_hit_rate and
  // prefetch_accuracy are those of the steps it took part in.
  int32_t batch_steps = 0;
  double avg_batch_size = 0;
  // This generation's share of the wall time of the steps that decoded its
  // tokens: each step that decoded tokens splits its time evenly among them
  // (a prompt chunk riding along is charged to the decoders). Summed over the
  // jobs of a batch it is the batch's decoding wall time, so decoded tokens /
  // decode_share_ms is the batch's rate; alone it equals decode_ms.
  double decode_share_ms = 0;
  // Prompt tokens copied from a prefix snapshot instead of prefilled
  // (GenerationBatch's prefix sharing); 0 when the whole prompt was computed.
  uint64_t prefix_tokens = 0;
};

}  // namespace ns
