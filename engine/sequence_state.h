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
// Recurrent state: per recurrent layer and sequence, conv_floats (the short
// convolutions' last inputs) and state_floats (the delta rule's matrices),
// F32 as the reference keeps them. Its size does not grow with the context.
//
// Contract: a sequence's recurrent state holds whatever its last forward left;
// a forward pass that processes position 0 of a sequence starts it from zero
// (reset_recurrent), so a job entering a slot never sees its predecessor's
// state, and a resumed job that replays its tokens from position 0 rebuilds
// it exactly. Not thread-safe (one forward at a time, like the Model).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ns {

// Which per-sequence state each layer keeps (from the architecture).
struct SequenceLayout {
  int64_t k_dim = 0, v_dim = 0;       // attention cache widths per token and attention layer
  int64_t conv_floats = 0;            // per recurrent layer and sequence
  int64_t state_floats = 0;           // per recurrent layer and sequence
  // [n_layer]: 1 where the layer attends (cache rows), 0 where it is recurrent.
  // Empty: every layer attends.
  std::vector<uint8_t> attends;
};

class SequenceState {
 public:
  SequenceState(int64_t n_layer, int64_t n_seq, int64_t n_ctx, const SequenceLayout& layout);

  int64_t n_seq() const { return n_seq_; }
  int64_t n_ctx() const { return n_ctx_; }
  int64_t k_dim() const { return layout_.k_dim; }
  int64_t v_dim() const { return layout_.v_dim; }
  int64_t n_attention_layers() const { return n_attn_; }
  int64_t n_recurrent_layers() const { return n_rec_; }

  // Attention cache row of layer il (an attending layer), sequence seq, position pos.
  uint16_t* k(int64_t il, int64_t seq, int64_t pos) { return k_.data() + row(il, seq, pos) * layout_.k_dim; }
  uint16_t* v(int64_t il, int64_t seq, int64_t pos) { return v_.data() + row(il, seq, pos) * layout_.v_dim; }
  // Recurrent state of layer il (a recurrent layer) for sequence seq.
  float* conv(int64_t il, int64_t seq) { return conv_.data() + rec(il, seq) * layout_.conv_floats; }
  float* recurrent(int64_t il, int64_t seq) { return state_.data() + rec(il, seq) * layout_.state_floats; }
  // Zeroes sequence seq's recurrent state in every recurrent layer.
  void reset_recurrent(int64_t seq);
  // Makes sequence dst a copy of sequence src's first n_tokens positions:
  // the attention rows [0, n_tokens) of every attention layer and the
  // recurrent state of every recurrent layer (which must be src's state after
  // exactly those tokens). Several choices of one prompt share its prefill so.
  void copy_sequence(int64_t src, int64_t dst, int64_t n_tokens);

  uint64_t attention_bytes() const { return (k_.size() + v_.size()) * sizeof(uint16_t); }
  uint64_t recurrent_bytes() const { return (conv_.size() + state_.size()) * sizeof(float); }
  uint64_t bytes() const { return attention_bytes() + recurrent_bytes(); }
  // Attention cache bytes one token of context takes (all layers).
  uint64_t bytes_per_token() const {
    return static_cast<uint64_t>(n_attn_ * (layout_.k_dim + layout_.v_dim)) * sizeof(uint16_t);
  }
  // Recurrent bytes one sequence takes, whatever its length.
  uint64_t recurrent_bytes_per_sequence() const {
    return static_cast<uint64_t>(n_rec_ * (layout_.conv_floats + layout_.state_floats)) * sizeof(float);
  }

 private:
  int64_t row(int64_t il, int64_t seq, int64_t pos) const {
    return (index_[static_cast<size_t>(il)] * n_seq_ + seq) * n_ctx_ + pos;
  }
  int64_t rec(int64_t il, int64_t seq) const { return index_[static_cast<size_t>(il)] * n_seq_ + seq; }

  int64_t n_seq_, n_ctx_;
  SequenceLayout layout_;
  int64_t n_attn_ = 0, n_rec_ = 0;
  std::vector<int64_t> index_;  // [n_layer]: the layer's index among the attention or the recurrent layers
  std::vector<uint16_t> k_, v_;
  std::vector<float> conv_, state_;
};

}  // namespace ns
