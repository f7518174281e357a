// What the model keeps per sequence between forward passes: the attention
// cache of every attention layer and the recurrent state of every linear-
// attention (KDA) layer. Allocated once at load for n_seq sequences (the batch
// slots) and never resized in the token loop.
//
// Attention cache: [attention layer][sequence][position][k_dim | v_dim], F16
// like the reference implementation (half the memory of F32, and the same
// rounding, which keeps near-tied MoE routing decisions identical). Only the
// layers that attend get rows: a hybrid model's recurrent layers cost nothing
// per token.
//
// Sliding-window layers (gpt-oss) keep a ring of rows instead of n_ctx: a
// query attends to its last `window` positions only, so the ring holds
// window - 1 + max_batch rows (every position a forward pass of max_batch
// tokens of one sequence writes or reads), rounded up to a multiple of 8 so
// that a position's row has the same index mod 8 as the position itself (the
// attention's 8-lane sums follow positions, as the reference's cache cells do).
// Position p lives in row p mod rows(il); a full layer's rows(il) is n_ctx.
//
// Long contexts share one pool (docs/long-context.md). The layers that see
// every position keep `pool_rows` rows in all, not n_seq x n_ctx: a sequence
// holds one contiguous range of them, the same range in every such layer,
// from reserve() to release(). Contiguous, so attention reads a sequence's
// rows exactly as before (row j of the range is position j). The ranges are
// handed out first-fit from a free list whose neighbours merge on release:
// many short sequences and a few long ones share the pool, at the price of
// fragmentation (a range of n rows needs n free rows side by side; when every
// sequence has released, the pool is one range again). pool_rows of
// n_seq x n_ctx (the default) is the fixed layout: sequence s always owns rows
// [s x n_ctx, (s + 1) x n_ctx) and reserve() never waits, so a caller that
// drives forward_batch() by hand (tests, `logits`) needs no reservation.
// The pool is mapped anonymous memory: a row costs RAM only once written.
//
// Compressed attention (deepseek4, docs/models.md): beside its raw keys (a
// sliding ring, above) a layer may keep one row of block_width uint16 per
// completed block of block_ratio positions, compactly: a layer holds
// ceil(pool_rows / ratio) block rows, and block b of a sequence is row
// (start + (b + 1) x ratio - 1) / ratio of it, where start is the sequence's
// first row of the pool; distinct sequences' ranges are disjoint, so their
// blocks' rows are too. Such a layer may also keep ring_floats F32 per
// sequence whatever its length (its compressors' state of the last
// positions), copied whole by copy_sequence (the snapshot contract of the
// recurrent state, below).
//
// Recurrent state: per recurrent layer and sequence, conv_floats (the short
// convolutions' last inputs) and state_floats (the delta rule's matrices),
// F32 as the reference keeps them. Its size does not grow with the context.
//
// Contract: a sequence's recurrent state holds whatever its last forward left;
// a forward pass that processes position 0 of a sequence starts it from zero
// (reset_recurrent), so a job entering a slot never sees its predecessor's
// state, and a resumed job that replays its tokens from position 0 rebuilds
// it exactly. Not thread-safe (one forward at a time, like the Model).
//
// Spare sequences (the prefix cache, engine/batch/prefix_cache.h): n_spare more
// sequences, ids n_seq .. n_seq + n_spare - 1, that never run a forward pass:
// they hold snapshots copied in and out with copy_sequence(). Each has its
// own sliding rings and recurrent state (counted in attention_bytes() and
// recurrent_bytes(), so the memory plan holds them) and takes its full
// layers' rows from the same pool as the batch's sequences, by reserve(): a
// snapshot of P tokens costs P rows while it is kept. With spares the pool is
// always handed out first-fit (pooled() is true), so every sequence, spare or
// not, must reserve its rows before it is used.
//
// Sizes are overflow-checked: a state whose rows or bytes do not fit in 64
// bits (a context_length of 2^40 over many layers) throws
// ns::Error(invalid_input) at construction; allocate() throws std::bad_alloc
// when the mapping is refused (Model::load turns it into an ns::Error).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace ns {

// Which per-sequence state each layer keeps (from the architecture).
struct SequenceLayout {
  int64_t k_dim = 0, v_dim = 0;  // attention cache widths per token and attention layer
  int64_t conv_floats = 0;       // per recurrent layer and sequence
  int64_t state_floats = 0;      // per recurrent layer and sequence
  // [n_layer]: 1 where the layer attends (cache rows), 0 where it is recurrent.
  // Empty: every layer attends.
  std::vector<uint8_t> attends;
  // [n_layer]: > 0 where an attending layer sees only its last `window`
  // positions (sliding-window attention). Empty: no such layer.
  std::vector<int64_t> window;
  // [n_layer]: compressed blocks (above): a layer's ratio (0: none) and its block row's width in uint16.
  // Empty: no such layer.
  std::vector<int64_t> block_ratio, block_width;
  // [n_layer]: floats an attending layer keeps per sequence whatever its length. Empty: none.
  std::vector<int64_t> ring_floats;
};

class SequenceState {
 public:
  // max_batch: the most tokens of one sequence a forward pass holds (sizes
  // the sliding layers' rings). allocate false: sizes only (a memory plan
  // for `model info`), no buffers: the accessors below must not be called.
  // pool_rows: the full layers' rows shared by all sequences (above); 0 or
  // anything at or above n_seq x n_ctx is the fixed layout.
  SequenceState(int64_t n_layer, int64_t n_seq, int64_t n_ctx, const SequenceLayout& layout, int64_t max_batch = 1,
                bool allocate = true, int64_t pool_rows = 0, int64_t n_spare = 0);
  ~SequenceState();
  SequenceState(const SequenceState&) = delete;
  SequenceState& operator=(const SequenceState&) = delete;
  // Allocates the buffers of a state constructed with allocate false (after
  // the memory plan accepted its size). No-op when already allocated.
  void allocate();

  int64_t n_seq() const { return n_seq_; }
  int64_t n_spare() const { return n_all_ - n_seq_; }  // the spare sequences (above) after them
  int64_t n_ctx() const { return n_ctx_; }
  // The pool: rows every full layer keeps for all sequences together.
  int64_t pool_rows() const { return pool_rows_; }
  bool pooled() const { return pooled_; }
  // Gives sequence seq (any of n_seq + n_spare) `n` rows (1 <= n <= n_ctx) of the pool, releasing what
  // it held; false when no n free rows lie side by side (nothing changes).
  // Fixed layout: always true. Positions [0, n) of seq are then valid.
  bool reserve(int64_t seq, int64_t n);
  void release(int64_t seq);
  // Rows sequence seq may use: its reservation (n_ctx in the fixed layout).
  int64_t seq_rows(int64_t seq) const { return len_[static_cast<size_t>(seq)]; }
  // The longest range reserve() could give now, and every free range's length in pool order.
  int64_t largest_free() const;
  std::vector<int64_t> free_ranges() const;
  int64_t k_dim() const { return layout_.k_dim; }
  int64_t v_dim() const { return layout_.v_dim; }
  int64_t n_attention_layers() const { return n_attn_; }
  int64_t n_recurrent_layers() const { return n_rec_; }

  // Attention cache row of layer il (an attending layer), sequence seq, position pos.
  uint16_t* k(int64_t il, int64_t seq, int64_t pos) { return kp_ + row(il, seq, pos) * layout_.k_dim; }
  uint16_t* v(int64_t il, int64_t seq, int64_t pos) { return vp_ + row(il, seq, pos) * layout_.v_dim; }
  // Rows layer il keeps per sequence: n_ctx, or a sliding layer's ring (positions wrap mod rows).
  int64_t rows(int64_t il) const { return rows_[static_cast<size_t>(il)]; }
  // The sliding window of layer il, 0 for a layer that sees every position.
  int64_t window(int64_t il) const { return layout_.window.empty() ? 0 : layout_.window[static_cast<size_t>(il)]; }
  int64_t n_sliding_layers() const { return n_swa_; }
  // Compressed block b (positions [b x ratio, (b + 1) x ratio)) of layer il for sequence seq: block_width[il]
  // uint16. Valid once the sequence holds position (b + 1) x ratio - 1.
  uint16_t* block(int64_t il, int64_t seq, int64_t b) {
    const size_t l = static_cast<size_t>(il);
    const int64_t r = layout_.block_ratio[l];
    return bp_ + block_off_[l] +
           static_cast<uint64_t>((start_[static_cast<size_t>(seq)] + (b + 1) * r - 1) / r * layout_.block_width[l]);
  }
  // The ring_floats[il] floats layer il keeps for sequence seq.
  float* ring(int64_t il, int64_t seq) {
    const size_t l = static_cast<size_t>(il);
    return rp_ + ring_off_[l] + static_cast<uint64_t>(seq * layout_.ring_floats[l]);
  }
  // Recurrent state of layer il (a recurrent layer) for sequence seq.
  float* conv(int64_t il, int64_t seq) { return conv_.data() + rec(il, seq) * layout_.conv_floats; }
  float* recurrent(int64_t il, int64_t seq) { return state_.data() + rec(il, seq) * layout_.state_floats; }
  // Zeroes sequence seq's recurrent state in every recurrent layer.
  void reset_recurrent(int64_t seq);
  // Makes sequence dst a copy of sequence src's first n_tokens positions:
  // the attention rows [0, n_tokens) of every attention layer, its completed
  // blocks, and the recurrent state of every recurrent layer and the rings
  // (which must be src's state after exactly those tokens). Several choices
  // of one prompt share its prefill so.
  void copy_sequence(int64_t src, int64_t dst, int64_t n_tokens);

  uint64_t attention_bytes() const {
    return row_bytes_per_token() * static_cast<uint64_t>(pool_rows_) + block_bytes_ +
           sliding_bytes_per_sequence() * static_cast<uint64_t>(n_all_);
  }
  uint64_t recurrent_bytes() const { return recurrent_bytes_per_sequence() * static_cast<uint64_t>(n_all_); }
  uint64_t bytes() const { return attention_bytes() + recurrent_bytes(); }
  // Attention cache bytes one token of context takes: the rows of the layers
  // that see every position, and the compressed blocks (a layer's block row
  // over its ratio, rounded up); a sliding layer's ring does not grow with
  // the context.
  uint64_t bytes_per_token() const { return row_bytes_per_token() + block_bytes_per_token_; }
  // Attention cache bytes of the rings per sequence, whatever its length: the
  // sliding layers' rows and the ring_floats.
  uint64_t sliding_bytes_per_sequence() const {
    return static_cast<uint64_t>(swa_rows_ * (layout_.k_dim + layout_.v_dim)) * sizeof(uint16_t) +
           static_cast<uint64_t>(ring_floats_) * sizeof(float);
  }
  // Recurrent bytes one sequence takes, whatever its length.
  uint64_t recurrent_bytes_per_sequence() const {
    return static_cast<uint64_t>(n_rec_ * (layout_.conv_floats + layout_.state_floats)) * sizeof(float);
  }

 private:
  uint64_t row_bytes_per_token() const {
    return static_cast<uint64_t>((n_attn_ - n_swa_) * (layout_.k_dim + layout_.v_dim)) * sizeof(uint16_t);
  }
  int64_t row(int64_t il, int64_t seq, int64_t pos) const {
    const size_t l = static_cast<size_t>(il);
    if (in_pool_[l]) return first_row_[l] + start_[static_cast<size_t>(seq)] + pos;
    return first_row_[l] + seq * rows_[l] + pos % rows_[l];
  }
  int64_t rec(int64_t il, int64_t seq) const { return index_[static_cast<size_t>(il)] * n_all_ + seq; }

  struct Buffer;                                   // anonymous mapping, zero until written
  int64_t n_seq_, n_all_, n_ctx_, pool_rows_ = 0;  // n_all_: n_seq_ + the spares
  bool pooled_ = false;
  SequenceLayout layout_;
  int64_t total_rows_ = 0;                         // rows of every layer together
  std::vector<int64_t> start_, len_;               // [seq]: its range of the pool
  std::vector<std::pair<int64_t, int64_t>> free_;  // free ranges of the pool (start, length), sorted, merged
  int64_t n_attn_ = 0, n_rec_ = 0, n_swa_ = 0;
  int64_t swa_rows_ = 0;             // rows of all sliding layers, per sequence
  std::vector<int64_t> index_;       // [n_layer]: the layer's index among the attention or the recurrent layers
  std::vector<int64_t> rows_;        // [n_layer]: cache rows per sequence (0: recurrent layer)
  std::vector<int64_t> first_row_;   // [n_layer]: the layer's first cache row
  std::vector<uint8_t> in_pool_;     // [n_layer]: 1 for a full layer (its rows are the pool)
  std::vector<uint64_t> block_off_;  // [n_layer]: the layer's first block row, in uint16
  std::vector<uint64_t> ring_off_;   // [n_layer]: the layer's first ring float
  uint64_t block_elems_ = 0, block_bytes_ = 0, block_bytes_per_token_ = 0;
  int64_t ring_floats_ = 0;  // ring floats of every layer, per sequence
  std::unique_ptr<Buffer> kbuf_, vbuf_, bbuf_, rbuf_;
  uint16_t* kp_ = nullptr;
  uint16_t* vp_ = nullptr;
  uint16_t* bp_ = nullptr;
  float* rp_ = nullptr;
  std::vector<float> conv_, state_;
};

}  // namespace ns
