#include "engine/state/sequence_state.h"

#include <sys/mman.h>

#include <algorithm>
#include <new>
#include <string>

#include "common/error.h"

namespace ns {

// Private anonymous pages: zero until written, and untouched rows never
// become resident (a 128K-token pool costs what its sequences wrote).
struct SequenceState::Buffer {
  void* p = nullptr;
  size_t bytes = 0;
  explicit Buffer(size_t n) : bytes(n) {
    if (bytes == 0) return;
    p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      p = nullptr;
      throw std::bad_alloc();
    }
  }
  ~Buffer() {
    if (p) ::munmap(p, bytes);
  }
  uint16_t* data() const { return static_cast<uint16_t*>(p); }
};

SequenceState::~SequenceState() = default;

SequenceState::SequenceState(int64_t n_layer, int64_t n_seq, int64_t n_ctx, const SequenceLayout& layout,
                             int64_t max_batch, bool allocate, int64_t pool_rows, int64_t n_spare)
    : n_seq_(n_seq), n_all_(n_seq + std::max<int64_t>(n_spare, 0)), n_ctx_(n_ctx), layout_(layout) {
  const auto beyond = [&] {
    return Error(ErrorKind::invalid_input, "a KV cache of " + std::to_string(n_seq_) + " sequences of " +
                                               std::to_string(n_ctx_) + " tokens over " + std::to_string(n_layer) +
                                               " layers is beyond any machine's memory; set a smaller context");
  };
  // Sizes the plan and the mapping compute from: refused, not wrapped round.
  if (__builtin_mul_overflow(n_seq_, n_ctx_, &pool_rows_)) throw beyond();
  if (pool_rows > 0 && pool_rows < pool_rows_) pool_rows_ = pool_rows;
  pooled_ = pool_rows_ < n_seq_ * n_ctx_ || n_all_ > n_seq_;
  start_.resize(static_cast<size_t>(n_all_));
  len_.resize(static_cast<size_t>(n_all_));
  if (pooled_) {
    free_.emplace_back(0, pool_rows_);
  } else {
    for (int64_t s = 0; s < n_seq_; ++s) {
      start_[static_cast<size_t>(s)] = s * n_ctx_;
      len_[static_cast<size_t>(s)] = n_ctx_;
    }
  }
  const auto check = [&](size_t size, const char* what) {
    if (size != 0 && static_cast<int64_t>(size) != n_layer)
      throw Error(ErrorKind::internal, std::string("sequence state: ") + what + " for " + std::to_string(size) +
                                           " layers, the model has " + std::to_string(n_layer));
  };
  check(layout_.attends.size(), "a layout");
  check(layout_.window.size(), "windows");
  check(layout_.block_ratio.size(), "block ratios");
  check(layout_.block_width.size(), "block widths");
  check(layout_.ring_floats.size(), "rings");
  for (int64_t il = 0; il < n_layer; ++il) {
    const bool attends = layout_.attends.empty() || layout_.attends[static_cast<size_t>(il)];
    index_.push_back(attends ? n_attn_++ : n_rec_++);
    int64_t rows = 0;
    const int64_t w = attends ? window(il) : 0;
    if (attends) {
      rows = w > 0 ? std::min(n_ctx_, (w - 1 + std::max<int64_t>(max_batch, 1) + 7) / 8 * 8) : n_ctx_;
      if (w > 0) {
        ++n_swa_;
        swa_rows_ += rows;
      }
    }
    rows_.push_back(rows);
    in_pool_.push_back(attends && w == 0);
    first_row_.push_back(total_rows_);
    int64_t layer_rows = pool_rows_;
    if (!(attends && w == 0) && __builtin_mul_overflow(rows, n_all_, &layer_rows)) throw beyond();
    if (__builtin_add_overflow(total_rows_, layer_rows, &total_rows_)) throw beyond();
  }
  int64_t elems = 0, bytes = 0;
  if (__builtin_mul_overflow(total_rows_, std::max(layout_.k_dim, layout_.v_dim), &elems) ||
      __builtin_mul_overflow(elems, int64_t{4}, &bytes))
    throw beyond();
  // Compressed blocks: a cell of the pool per `ratio` rows (sequence_state.h), and the rings per sequence.
  for (int64_t il = 0; il < n_layer; ++il) {
    const size_t l = static_cast<size_t>(il);
    const int64_t r = layout_.block_ratio.empty() ? 0 : layout_.block_ratio[l];
    const int64_t width = r > 0 ? layout_.block_width[l] : 0;
    block_off_.push_back(block_elems_);
    if (r > 0) {
      int64_t cells = pool_rows_ / r + (pool_rows_ % r != 0), layer = 0;
      if (__builtin_mul_overflow(cells, width, &layer)) throw beyond();
      block_elems_ += static_cast<uint64_t>(layer);
      block_bytes_per_token_ += static_cast<uint64_t>((width * 2 + r - 1) / r);
    }
    ring_off_.push_back(static_cast<uint64_t>(ring_floats_ * n_all_));
    const int64_t rf = layout_.ring_floats.empty() ? 0 : layout_.ring_floats[l];
    if (__builtin_add_overflow(ring_floats_, rf, &ring_floats_)) throw beyond();
  }
  if (__builtin_mul_overflow(ring_floats_, n_all_, &elems) || block_elems_ > (uint64_t{1} << 60)) throw beyond();
  block_bytes_ = block_elems_ * sizeof(uint16_t);
  if (allocate) this->allocate();
}

void SequenceState::allocate() {
  if (kbuf_) return;
  kbuf_ = std::make_unique<Buffer>(static_cast<size_t>(total_rows_ * layout_.k_dim) * sizeof(uint16_t));
  vbuf_ = std::make_unique<Buffer>(static_cast<size_t>(total_rows_ * layout_.v_dim) * sizeof(uint16_t));
  bbuf_ = std::make_unique<Buffer>(block_bytes_);
  rbuf_ = std::make_unique<Buffer>(static_cast<size_t>(ring_floats_ * n_all_) * sizeof(float));
  kp_ = kbuf_->data();
  vp_ = vbuf_->data();
  bp_ = bbuf_->data();
  rp_ = static_cast<float*>(rbuf_->p);
  const auto count = [&](int64_t layers, int64_t per) { return static_cast<size_t>(layers * n_all_ * per); };
  conv_.resize(count(n_rec_, layout_.conv_floats));
  state_.resize(count(n_rec_, layout_.state_floats));
}

bool SequenceState::reserve(int64_t seq, int64_t n) {
  if (seq < 0 || seq >= n_all_ || n < 1 || n > n_ctx_)
    throw Error(ErrorKind::internal, "sequence state: a reservation of " + std::to_string(n) + " rows for sequence " +
                                         std::to_string(seq) + " (contexts of " + std::to_string(n_ctx_) + ")");
  if (!pooled_) return true;
  release(seq);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < n) continue;
    start_[static_cast<size_t>(seq)] = it->first;
    len_[static_cast<size_t>(seq)] = n;
    it->first += n;
    it->second -= n;
    if (it->second == 0) free_.erase(it);
    return true;
  }
  return false;
}

void SequenceState::release(int64_t seq) {
  const auto s = static_cast<size_t>(seq);
  if (!pooled_ || len_[s] == 0) return;
  const std::pair<int64_t, int64_t> range{start_[s], len_[s]};
  len_[s] = 0;
  auto it = free_.insert(std::upper_bound(free_.begin(), free_.end(), range), range);
  if (auto next = it + 1; next != free_.end() && it->first + it->second == next->first) {
    it->second += next->second;
    free_.erase(next);
  }
  if (it != free_.begin())
    if (auto prev = it - 1; prev->first + prev->second == it->first) {
      prev->second += it->second;
      free_.erase(it);
    }
}

std::vector<int64_t> SequenceState::free_ranges() const {
  if (!pooled_) return std::vector<int64_t>(static_cast<size_t>(n_seq_), n_ctx_);
  std::vector<int64_t> out;
  for (const auto& r : free_) out.push_back(r.second);
  return out;
}

int64_t SequenceState::largest_free() const {
  if (!pooled_) return n_ctx_;
  int64_t best = 0;
  for (const auto& r : free_) best = std::max(best, r.second);
  return best;
}

void SequenceState::reset_recurrent(int64_t seq) {
  for (int64_t r = 0; r < n_rec_; ++r) {
    const auto c = static_cast<size_t>((r * n_all_ + seq) * layout_.conv_floats);
    const auto s = static_cast<size_t>((r * n_all_ + seq) * layout_.state_floats);
    std::fill_n(conv_.begin() + static_cast<std::ptrdiff_t>(c), layout_.conv_floats, 0.0f);
    std::fill_n(state_.begin() + static_cast<std::ptrdiff_t>(s), layout_.state_floats, 0.0f);
  }
}

void SequenceState::copy_sequence(int64_t src, int64_t dst, int64_t n_tokens) {
  if (src < 0 || src >= n_all_ || dst < 0 || dst >= n_all_ || n_tokens < 0 || n_tokens > seq_rows(src) ||
      n_tokens > seq_rows(dst))
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
  for (int64_t il = 0; il < static_cast<int64_t>(rows_.size()); ++il) {
    const size_t l = static_cast<size_t>(il);
    if (!layout_.block_ratio.empty() && layout_.block_ratio[l] > 0)
      for (int64_t b = 0; b < n_tokens / layout_.block_ratio[l]; ++b)
        std::copy_n(block(il, src, b), layout_.block_width[l], block(il, dst, b));
    if (!layout_.ring_floats.empty()) std::copy_n(ring(il, src), layout_.ring_floats[l], ring(il, dst));
  }
  for (int64_t r = 0; r < n_rec_; ++r) {
    const auto from = static_cast<size_t>(r * n_all_ + src), to = static_cast<size_t>(r * n_all_ + dst);
    std::copy_n(conv_.begin() + static_cast<std::ptrdiff_t>(from * layout_.conv_floats), layout_.conv_floats,
                conv_.begin() + static_cast<std::ptrdiff_t>(to * layout_.conv_floats));
    std::copy_n(state_.begin() + static_cast<std::ptrdiff_t>(from * layout_.state_floats), layout_.state_floats,
                state_.begin() + static_cast<std::ptrdiff_t>(to * layout_.state_floats));
  }
}

}  // namespace ns
