#include "engine/sequence_state.h"

#include <algorithm>

#include "engine/util/error.h"

namespace ns {

SequenceState::SequenceState(int64_t n_layer, int64_t n_seq, int64_t n_ctx, const SequenceLayout& layout,
                             int64_t max_batch, bool allocate)
    : n_seq_(n_seq), n_ctx_(n_ctx), layout_(layout) {
  const auto check = [&](size_t size, const char* what) {
    if (size != 0 && static_cast<int64_t>(size) != n_layer)
      throw Error(ErrorKind::internal, std::string("sequence state: ") + what + " for " + std::to_string(size) +
                                           " layers, the model has " + std::to_string(n_layer));
  };
  check(layout_.attends.size(), "a layout");
  check(layout_.window.size(), "windows");
  int64_t total_rows = 0;  // per sequence
  for (int64_t il = 0; il < n_layer; ++il) {
    const bool attends = layout_.attends.empty() || layout_.attends[static_cast<size_t>(il)];
    index_.push_back(attends ? n_attn_++ : n_rec_++);
    int64_t rows = 0;
    if (attends) {
      const int64_t w = window(il);
      rows = w > 0 ? std::min(n_ctx_, (w - 1 + std::max<int64_t>(max_batch, 1) + 7) / 8 * 8) : n_ctx_;
      if (w > 0) {
        ++n_swa_;
        swa_rows_ += rows;
      }
    }
    rows_.push_back(rows);
    first_row_.push_back(total_rows * n_seq_);
    total_rows += rows;
  }
  if (!allocate) return;
  k_.resize(static_cast<size_t>(total_rows * n_seq_ * layout_.k_dim));
  v_.resize(static_cast<size_t>(total_rows * n_seq_ * layout_.v_dim));
  const auto count = [&](int64_t layers, int64_t per) { return static_cast<size_t>(layers * n_seq_ * per); };
  conv_.resize(count(n_rec_, layout_.conv_floats));
  state_.resize(count(n_rec_, layout_.state_floats));
}

void SequenceState::reset_recurrent(int64_t seq) {
  for (int64_t r = 0; r < n_rec_; ++r) {
    const auto c = static_cast<size_t>((r * n_seq_ + seq) * layout_.conv_floats);
    const auto s = static_cast<size_t>((r * n_seq_ + seq) * layout_.state_floats);
    std::fill_n(conv_.begin() + static_cast<std::ptrdiff_t>(c), layout_.conv_floats, 0.0f);
    std::fill_n(state_.begin() + static_cast<std::ptrdiff_t>(s), layout_.state_floats, 0.0f);
  }
}

void SequenceState::copy_sequence(int64_t src, int64_t dst, int64_t n_tokens) {
  if (src < 0 || src >= n_seq_ || dst < 0 || dst >= n_seq_ || n_tokens < 0 || n_tokens > n_ctx_)
    throw Error(ErrorKind::internal, "sequence state: copy of " + std::to_string(n_tokens) + " tokens from sequence " +
                                         std::to_string(src) + " to " + std::to_string(dst) + " is out of range");
  if (src == dst) return;
  // A sequence's rows of a layer are contiguous; a sliding layer's ring holds
  // position p at p mod rows, so once the ring is full all of it is copied.
  for (int64_t il = 0; il < static_cast<int64_t>(rows_.size()); ++il) {
    const int64_t n = std::min(n_tokens, rows_[static_cast<size_t>(il)]);
    if (n == 0) continue;  // a recurrent layer
    std::copy_n(k(il, src, 0), n * layout_.k_dim, k(il, dst, 0));
    std::copy_n(v(il, src, 0), n * layout_.v_dim, v(il, dst, 0));
  }
  for (int64_t r = 0; r < n_rec_; ++r) {
    const auto from = static_cast<size_t>(r * n_seq_ + src), to = static_cast<size_t>(r * n_seq_ + dst);
    std::copy_n(conv_.begin() + static_cast<std::ptrdiff_t>(from * layout_.conv_floats), layout_.conv_floats,
                conv_.begin() + static_cast<std::ptrdiff_t>(to * layout_.conv_floats));
    std::copy_n(state_.begin() + static_cast<std::ptrdiff_t>(from * layout_.state_floats), layout_.state_floats,
                state_.begin() + static_cast<std::ptrdiff_t>(to * layout_.state_floats));
  }
}

}  // namespace ns
