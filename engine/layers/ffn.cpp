#include "engine/layers/ffn.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <optional>
#include <span>

#include "engine/state/ops.h"
#include "engine/state/trace.h"
#include "engine/stream/expert_cache.h"
#include "common/error.h"

namespace ns {

FfnActivation FfnActivation::of(const Hparams& hp) {
  FfnActivation a;
  if (hp.situ_beta > 0.0f) {
    a.kind = Kind::situ;
    a.beta = hp.situ_beta;
    a.linear_beta = hp.situ_linear_beta;
  }
  return a;
}

void FfnActivation::apply(float* gate, const float* up, int64_t rows, int64_t width) const {
  const int64_t n = rows * width;
  switch (kind) {
    case Kind::situ: ops::situ_mul(gate, up, n, beta, linear_beta); break;
    case Kind::swiglu_oai: ops::swiglu_oai_mul(gate, up, n, alpha, limit); break;
    case Kind::swiglu_clamp:
      for (int64_t i = 0; i < n; ++i) {
        const float g = std::min(gate[i], limit), u = std::clamp(up[i], -limit, limit);
        gate[i] = g / (1.0f + std::exp(-g)) * u;
      }
      break;
    case Kind::silu_clamp:
      for (int64_t i = 0; i < n; ++i) {
        const float g = gate[i] / (1.0f + std::exp(-gate[i]));
        gate[i] = std::min(g, limit) * std::clamp(up[i], -limit, limit);
      }
      break;
    case Kind::silu: {
      const kernels::Isa isa = kernels::active_isa();
      for (int64_t r = 0; r < rows; ++r) ops::silu_mul(gate + r * width, up + r * width, width, isa);
      break;
    }
  }
}

namespace {
// rows[t][i] += bias[i] for m rows of `width`; nothing without a bias.
void add_row_bias(float* rows, const float* bias, int64_t m, int64_t width) {
  if (bias == nullptr) return;
  for (int64_t t = 0; t < m; ++t) ops::add(rows + t * width, bias, width);
}
}  // namespace

void gated_ffn(const FfnWeights& w, const float* in, int64_t m, float* a, float* b, float* out, ForwardState& s,
               bool per_token) {
  const int64_t n_ff = w.gate.rows;
  const kernels::MatmulTask gate_up[] = {{w.gate, in, m, a}, {w.up, in, m, b}};
  kernels::matmul_group(gate_up, 2, *s.pool, s.mm, per_token);
  add_row_bias(a, w.gate_b, m, n_ff);
  add_row_bias(b, w.up_b, m, n_ff);
  w.act.apply(a, b, m, n_ff);
  kernels::matmul(w.down, a, m, out, *s.pool, s.mm, per_token);
  add_row_bias(out, w.down_b, m, w.down.rows);
}

void ffn_tensors(TensorTable& t, const std::string& p, const std::string& suffix, int64_t n_ff, int64_t n_embd,
                 FfnWeights& w) {
  t.matrix(p + "ffn_gate" + suffix + ".weight", n_ff, n_embd, TensorRole::input, &w.gate);
  t.matrix(p + "ffn_up" + suffix + ".weight", n_ff, n_embd, TensorRole::input, &w.up);
  t.matrix(p + "ffn_down" + suffix + ".weight", n_embd, n_ff, TensorRole::residual, &w.down);
}

void moe_tensors(TensorTable& t, const std::string& p, const Hparams& hp, MoeWeights& m, const MoeBiases& biases) {
  const int64_t d = hp.n_embd, ew = hp.expert_width(), latent = hp.n_expert_latent;
  using R = TensorRole;
  m.layer = t.block();  // describe_blocks' block: the expert cache's key
  t.matrix(p + "ffn_gate_inp.weight", hp.n_expert, d, R::router, &m.router);
  if (biases.router) t.vector(p + "ffn_gate_inp.bias", hp.n_expert, R::bias, &m.router_bias, *biases.router);
  if (biases.selection)
    t.vector(p + "exp_probs_b.bias", hp.n_expert, R::selection, &m.selection_bias, *biases.selection);
  t.experts(p + "ffn_gate_exps.weight", hp.n_expert, hp.n_ff_expert, ew, R::routed, &m.gate);
  t.experts(p + "ffn_up_exps.weight", hp.n_expert, hp.n_ff_expert, ew, R::routed, &m.up);
  // Latent experts write the latent sum; ffn_routed_up writes the residual.
  t.experts(p + "ffn_down_exps.weight", hp.n_expert, ew, hp.n_ff_expert, latent > 0 ? R::routed : R::routed_residual,
            &m.down);
  m.act = FfnActivation::of(hp);
  if (latent > 0) {
    t.matrix(p + "ffn_routed_down.weight", ew, d, R::input, &m.routed_down);
    t.matrix(p + "ffn_routed_up.weight", d, ew, R::residual, &m.routed_up);
    t.vector(p + "ffn_routed_norm.weight", ew, R::norm, &m.routed_norm, Presence::optional);
    m.rms_eps = hp.rms_eps;
  }
  m.n_used = hp.n_expert_used;
  m.normalize_weights = hp.expert_weights_norm;
  m.gating = hp.expert_gating;
  m.weights_scale = hp.expert_weights_scale;
  m.n_groups = hp.n_expert_groups;
  m.n_groups_used = hp.n_group_used;
}

void gated_shared_expert_tensors(TensorTable& t, const std::string& p, int64_t n_ff, int64_t n_embd, MoeWeights& m) {
  m.has_shared = true;
  t.vector(p + "ffn_gate_inp_shexp.weight", n_embd, TensorRole::score, &m.shared_gate_inp);
  ffn_tensors(t, p, "_shexp", n_ff, n_embd, m.shared);
}

namespace {

constexpr int64_t kMaxGroups = 1024;  // Hparams rejects more

// Index of the largest score among the experts not yet taken and allowed by
// their group. Ties go to the lower id, like a stable sort.
int32_t best_expert(const float* probs, const float* bias, int64_t n_expert, const int32_t* taken, int64_t n_taken,
                    const bool* group_allowed, int64_t group_size) {
  int32_t best = -1;
  float best_score = 0;
  for (int64_t e = 0; e < n_expert; ++e) {
    if (group_allowed && !group_allowed[e / group_size]) continue;
    bool is_taken = false;
    for (int64_t j = 0; j < n_taken; ++j) is_taken |= taken[j] == e;
    if (is_taken) continue;
    const float score = bias ? probs[e] + bias[e] : probs[e];
    if (best < 0 || score > best_score) {
      best = static_cast<int32_t>(e);
      best_score = score;
    }
  }
  return best;
}

// Marks the n_groups_used groups whose two best selection scores sum highest.
void choose_groups(const float* probs, const float* bias, const MoeWeights& w, int64_t n_expert, bool* allowed) {
  const int64_t group_size = n_expert / w.n_groups;
  std::array<float, kMaxGroups> score{};
  for (int64_t g = 0; g < w.n_groups; ++g) {
    float top1 = -INFINITY, top2 = -INFINITY;
    for (int64_t e = g * group_size; e < (g + 1) * group_size; ++e) {
      const float v = bias ? probs[e] + bias[e] : probs[e];
      if (v > top1) {
        top2 = top1;
        top1 = v;
      } else if (v > top2) {
        top2 = v;
      }
    }
    score[g] = group_size > 1 ? top1 + top2 : top1;
    allowed[g] = false;
  }
  for (int64_t k = 0; k < w.n_groups_used; ++k) {
    int64_t best = -1;
    for (int64_t g = 0; g < w.n_groups; ++g)
      if (!allowed[g] && (best < 0 || score[g] > score[best])) best = g;
    allowed[best] = true;
  }
}

// Picks one token's experts and their weights; probs receives the gated router output.
// hashed: the ids already chosen (hash routing), only weighed here.
void route_token(const float* logits, int64_t n_expert, const MoeWeights& w, float* probs, int32_t* ids, float* weights,
                 const int32_t* hashed = nullptr) {
  std::memcpy(probs, logits, sizeof(float) * static_cast<size_t>(n_expert));
  if (w.gating == ExpertGating::softmax) {
    ops::softmax(probs, n_expert);
  } else if (w.gating == ExpertGating::sigmoid) {
    for (int64_t e = 0; e < n_expert; ++e) probs[e] = 1.0f / (1.0f + std::exp(-probs[e]));
  } else if (w.gating == ExpertGating::sqrt_softplus) {
    // The reference's softplus: x itself above 20.
    for (int64_t e = 0; e < n_expert; ++e)
      probs[e] = std::sqrt(probs[e] > 20.0f ? probs[e] : std::log(1.0f + std::exp(probs[e])));
  }  // softmax_weight: choose on the logits, softmax over the chosen below
  const float* bias = w.selection_bias.empty() ? nullptr : w.selection_bias.data();
  std::array<bool, kMaxGroups> allowed{};
  const bool grouped = w.n_groups > 1;
  if (grouped) choose_groups(probs, bias, w, n_expert, allowed.data());
  for (int64_t k = 0; k < w.n_used; ++k) {
    ids[k] = hashed != nullptr ? hashed[k]
                               : best_expert(probs, bias, n_expert, ids, k, grouped ? allowed.data() : nullptr,
                                             grouped ? n_expert / w.n_groups : 1);
    weights[k] = probs[ids[k]];  // the unbiased probability
  }
  // The reference's soft_max over n_used values (libm exp below 8 of them, like ops::softmax).
  if (w.gating == ExpertGating::softmax_weight) ops::softmax(weights, w.n_used);
  if (w.normalize_weights) {
    float sum = 0;
    for (int64_t k = 0; k < w.n_used; ++k) sum += weights[k];
    sum = std::max(sum, 6.103515625e-5f);  // the reference clamps to the smallest normal F16
    for (int64_t k = 0; k < w.n_used; ++k) weights[k] /= sum;
  }
  if (w.weights_scale != 0.0f && w.weights_scale != 1.0f)
    for (int64_t k = 0; k < w.n_used; ++k) weights[k] *= w.weights_scale;
}

// s.out += shared experts(s.xn), gated per token when the layer has a gate.
void add_shared_experts(const MoeWeights& w, ForwardState& s) {
  const int64_t n = s.n, n_embd = w.router.cols;
  gated_ffn(w.shared, s.xn.data(), n, s.ff_a.data(), s.ff_b.data(), s.ex_out.data(), s);
  trace(s, "ffn_shexp", w.layer, s.ex_out.data(), n_embd);
  for (int64_t t = 0; t < n; ++t) {
    float gate = 1.0f;
    if (!w.shared_gate_inp.empty()) {
      double dot = 0;
      for (int64_t i = 0; i < n_embd; ++i) dot += static_cast<double>(w.shared_gate_inp[i]) * s.xn[t * n_embd + i];
      gate = 1.0f / (1.0f + std::exp(-static_cast<float>(dot)));
    }
    if (gate == 1.0f)
      ops::add(&s.out[t * n_embd], &s.ex_out[t * n_embd], n_embd);
    else
      ops::add_scaled(&s.out[t * n_embd], &s.ex_out[t * n_embd], gate, n_embd);
  }
}

// Experts per ExpertGroup: two products each in one matmul_group call (64 tasks).
constexpr size_t kGroupExperts = 32;

// One expert of a group: its weights, its (token, slot) pairs and, once
// added, its first row in the group's buffers; `held` is its cache index.
struct GroupExpert {
  int32_t e = -1;
  FfnWeights fw;
  size_t held = 0;
  int64_t first = 0;
};

// The experts of one group over the tokens routed to them: every expert's
// tokens gathered into s.ex_in one expert after another, the gate and up
// products of all of them in one matmul_group call and the down products in
// another (one wake of the pool each, where one expert's one-token product
// takes about as long as a wake), then each (token, slot) output stored in
// s.slot_out (unweighted: the per-token reduction weighs them). Each expert's
// products are computed as they would be alone (matmul_group's bits).
class ExpertGroup {
 public:
  ExpertGroup(int64_t n_used, const float* in, int64_t width, ForwardState& s)
      : n_used_(n_used), in_(in), width_(width), s_(s) {}
  bool empty() const { return n_ == 0; }
  size_t size() const { return n_; }
  const GroupExpert& operator[](size_t i) const { return g_[i]; }
  // Whether expert e's tokens fit beside those already in the group.
  bool fits(int32_t e) const { return n_ < kGroupExperts && rows_ + s_.expert_count[e] <= s_.max_batch; }
  void add(const GroupExpert& x) {
    GroupExpert& g = g_[n_++];
    g = x;
    g.first = rows_;
    const int64_t m = s_.expert_count[x.e];
    const int32_t* rows = &s_.expert_rows[s_.expert_first[x.e]];
    for (int64_t j = 0; j < m; ++j)
      std::memcpy(&s_.ex_in[(rows_ + j) * width_], &in_[(rows[j] / n_used_) * width_], sizeof(float) * width_);
    rows_ += m;
  }
  void run() {
    std::array<kernels::MatmulTask, 2 * kGroupExperts> tasks;
    for (size_t i = 0; i < n_; ++i) {
      const GroupExpert& g = g_[i];
      const int64_t m = s_.expert_count[g.e], n_ff = g.fw.gate.rows;
      const float* x = &s_.ex_in[g.first * width_];
      tasks[2 * i] = {g.fw.gate, x, m, &s_.ex_a[g.first * n_ff]};
      tasks[2 * i + 1] = {g.fw.up, x, m, &s_.ex_b[g.first * n_ff]};
    }
    kernels::matmul_group(tasks.data(), 2 * n_, *s_.pool, s_.mm, /*per_token=*/true);
    for (size_t i = 0; i < n_; ++i) {
      const GroupExpert& g = g_[i];
      const int64_t m = s_.expert_count[g.e], n_ff = g.fw.gate.rows;
      float* a = &s_.ex_a[g.first * n_ff];
      float* b = &s_.ex_b[g.first * n_ff];
      add_row_bias(a, g.fw.gate_b, m, n_ff);
      add_row_bias(b, g.fw.up_b, m, n_ff);
      g.fw.act.apply(a, b, m, n_ff);
      tasks[i] = {g.fw.down, a, m, &s_.ex_out[g.first * width_]};
    }
    kernels::matmul_group(tasks.data(), n_, *s_.pool, s_.mm, /*per_token=*/true);
    for (size_t i = 0; i < n_; ++i) {
      const GroupExpert& g = g_[i];
      const int64_t m = s_.expert_count[g.e];
      const int32_t* rows = &s_.expert_rows[s_.expert_first[g.e]];
      for (int64_t j = 0; j < m; ++j) {
        float* out = &s_.slot_out[static_cast<size_t>(rows[j]) * static_cast<size_t>(width_)];
        add_row_bias(&s_.ex_out[(g.first + j) * width_], g.fw.down_b, 1, width_);
        std::memcpy(out, &s_.ex_out[(g.first + j) * width_], sizeof(float) * width_);
      }
    }
  }
  void clear() { n_ = 0, rows_ = 0; }

 private:
  int64_t n_used_;
  const float* in_;
  int64_t width_;
  ForwardState& s_;
  std::array<GroupExpert, kGroupExperts> g_;
  size_t n_ = 0;
  int64_t rows_ = 0;
};

// One expert's matrices inside a cache slot: the mapping's shapes and strides,
// in the layout the cache landed them in (kernels::repacked_type).
// Expert e's row of a per-expert bias table, or null when the layer has none.
const float* expert_bias(const std::vector<float>& table, int32_t e, int64_t width) {
  return table.empty() ? nullptr : table.data() + static_cast<size_t>(e) * static_cast<size_t>(width);
}

// Expert e's matrices (from the mapping or a cache slot) with its biases.
FfnWeights expert_weights(const MoeWeights& w, int32_t e, kernels::MatrixView gate, kernels::MatrixView up,
                          kernels::MatrixView down) {
  FfnWeights f{gate, up, down, w.act};
  f.gate_b = expert_bias(w.gate_bias, e, w.gate.rows);
  f.up_b = expert_bias(w.up_bias, e, w.up.rows);
  f.down_b = expert_bias(w.down_bias, e, w.down.rows);
  return f;
}

FfnWeights slot_weights(const MoeWeights& w, int32_t e, const stream::ExpertWeights& ew) {
  const auto view = [&ew](const ExpertsView& v, const uint8_t* data) {
    const gguf::GgmlType type = ew.landed ? kernels::repacked_type(v.type, v.rows) : v.type;
    return kernels::MatrixView{type, data, v.rows, v.cols, v.row_stride};
  };
  return expert_weights(w, e, view(w.gate, ew.gate()), view(w.up, ew.up()), view(w.down, ew.down()));
}

// The next layer's router when its experts are predicted (prefetch_next_layer), else null:
// also when the cache holds every expert, where a prediction would read the
// router's weights (a 64 x 2048 F32 router is 512 KB, 1 % of a DeepSeek-V2-Lite
// token's bytes) for a prefetch with nothing to read.
const kernels::MatrixView* next_router(const MoeWeights& w, const ForwardState& s) {
  const size_t next = static_cast<size_t>(w.layer) + 1;
  if (!s.experts || !s.predict_next || w.layer < 0 || next >= s.routers.size() || s.routers[next].rows == 0 ||
      s.experts->holds_every_expert())
    return nullptr;
  return &s.routers[next];
}

// Guesses the next layer's experts by applying its router to this layer's
// normed input (the residual stream changes little from one layer to the
// next; s.predict_logits, computed with this layer's router by moe_ffn) and
// prefetches the union of every token's top n_used.
void prefetch_next_layer(const MoeWeights& w, ForwardState& s) {
  const kernels::MatrixView* router = next_router(w, s);
  if (router == nullptr) return;
  const size_t next = static_cast<size_t>(w.layer) + 1;
  const int64_t n = s.n, n_expert = router->rows;
  std::fill(s.predicted.begin(), s.predicted.begin() + n_expert, 0);
  for (int64_t t = 0; t < n; ++t) {
    const float* row = &s.predict_logits[t * n_expert];
    const int64_t width = s.predict_width > 0 ? std::min(s.predict_width, w.n_used) : w.n_used;
    for (int64_t k = 0; k < std::min(width, n_expert); ++k) {
      int64_t best = -1;
      for (int64_t e = 0; e < n_expert; ++e)
        if (s.predicted[e] != t + 1 && (best < 0 || row[e] > row[best])) best = e;
      s.predicted[best] = static_cast<int32_t>(t + 1);  // marks "picked for token t" and "picked at all"
    }
  }
  int64_t n_pred = 0;
  for (int64_t e = 0; e < n_expert; ++e)
    if (s.predicted[e] != 0) s.active[n_pred++] = static_cast<int32_t>(e);
  s.experts->prefetch(static_cast<uint32_t>(next),
                      std::span<const int32_t>(s.active.data(), static_cast<size_t>(n_pred)));
}

}  // namespace

void moe_ffn(const MoeWeights& w, ForwardState& s) {
  const int64_t n = s.n, n_expert = w.router.rows, n_used = w.n_used;
  const bool latent = w.routed_down.rows > 0;
  const int64_t width = w.gate.cols;  // the experts' input and output width
  // The products of the normed input in one parallel call (one pool wake, one
  // conversion of s.xn): the router, the latent experts' down projection, the
  // next layer's router for its prefetch.
  kernels::MatmulTask first[3] = {{w.router, s.xn.data(), n, s.router.data()}};
  size_t n_first = 1;
  if (latent) first[n_first++] = {w.routed_down, s.xn.data(), n, s.moe_latent.data()};
  if (const kernels::MatrixView* next = next_router(w, s))
    first[n_first++] = {*next, s.xn.data(), n, s.predict_logits.data()};
  kernels::matmul_group(first, n_first, *s.pool, s.mm);
  if (!w.router_bias.empty())
    for (int64_t t = 0; t < n; ++t) ops::add(&s.router[t * n_expert], w.router_bias.data(), n_expert);
  const float* expert_in = latent ? s.moe_latent.data() : s.xn.data();
  trace(s, "ffn_moe_logits", w.layer, s.router.data(), n_expert);
  for (int64_t t = 0; t < n; ++t) {
    const int32_t* hashed = nullptr;
    if (!w.hash_experts.empty()) {
      const auto row = static_cast<size_t>(s.tok[static_cast<size_t>(t)]) * static_cast<size_t>(n_used);
      if (row + static_cast<size_t>(n_used) > w.hash_experts.size())
        throw Error(ErrorKind::internal, "moe_ffn: a token id outside the hash routing table");
      hashed = &w.hash_experts[row];
    }
    route_token(&s.router[t * n_expert], n_expert, w, &s.router[t * n_expert], &s.chosen[t * n_used],
                &s.chosen_w[t * n_used], hashed);
  }

  // Counting sort of the (token, slot) pairs by expert.
  std::fill(s.expert_count.begin(), s.expert_count.begin() + n_expert, 0);
  for (int64_t i = 0; i < n * n_used; ++i) ++s.expert_count[s.chosen[i]];
  int32_t acc = 0;
  for (int64_t e = 0; e < n_expert; ++e) {
    s.expert_first[e] = acc;
    acc += s.expert_count[e];
  }
  for (int64_t e = 0; e < n_expert; ++e) s.expert_count[e] = 0;
  for (int64_t i = 0; i < n * n_used; ++i) {
    const int32_t e = s.chosen[i];
    s.expert_rows[s.expert_first[e] + s.expert_count[e]++] = static_cast<int32_t>(i);
  }

  if (s.trace_observer != nullptr && *s.trace_observer) {
    trace(s, "ffn_moe_probs", w.layer, s.router.data(), n_expert);
    std::vector<float> ids(s.chosen.begin(), s.chosen.begin() + n * n_used);
    trace(s, "ffn_moe_topk", w.layer, ids.data(), n_used);
    trace(s, "ffn_moe_weights_scaled", w.layer, s.chosen_w.data(), n_used);
  }
  size_t n_active = 0;
  for (int64_t e = 0; e < n_expert; ++e)
    if (s.expert_count[e] > 0) s.active[n_active++] = static_cast<int32_t>(e);
  s.experts_routed += n_active;
  if (s.routing_observer && *s.routing_observer)
    (*s.routing_observer)(RoutingEvent{w.layer, n, n_used, n_expert, s.chosen.data(), s.chosen_w.data(),
                                       static_cast<int64_t>(n_active), s.router.data(),
                                       w.selection_bias.empty() ? nullptr : w.selection_bias.data(), w.n_groups,
                                       w.n_groups_used, !w.hash_experts.empty()});

  ExpertGroup group(n_used, expert_in, width, s);
  if (s.experts) {
    if (w.layer < 0) throw Error(ErrorKind::internal, "moe_ffn: streamed experts need the layer index of MoeWeights");
    // Copied: prefetch_next_layer reuses s.active for its list.
    stream::ExpertCache& cache = *s.experts;
    cache.acquire(static_cast<uint32_t>(w.layer), std::span<const int32_t>(s.active.data(), n_active));
    std::copy_n(s.active.begin(), n_active, s.active.begin() + n_expert);
    if (s.predict_next) prefetch_next_layer(w, s);
    // A group: the next expert in memory (waiting for it if need be), then
    // those already in memory that fit beside it; never waits while holding
    // some, so the reads of the others go on. One that does not fit opens the
    // next group.
    const auto held = [&](size_t i, const stream::ExpertWeights& ew) {
      const int32_t e = s.active[static_cast<size_t>(n_expert) + i];
      return GroupExpert{e, slot_weights(w, e, ew), i};
    };
    std::optional<GroupExpert> carry;
    for (size_t handed = 0; handed < n_active || carry;) {
      if (carry) {
        group.add(*carry);
        carry.reset();
      } else {
        stream::ExpertWeights ew;
        const size_t i = cache.wait_next(&ew);
        ++handed;
        group.add(held(i, ew));
      }
      while (handed < n_active) {
        stream::ExpertWeights ew;
        const std::optional<size_t> i = cache.try_next(&ew);
        if (!i) break;
        ++handed;
        const GroupExpert x = held(*i, ew);
        if (!group.fits(x.e)) {
          carry = x;
          break;
        }
        group.add(x);
      }
      group.run();
      for (size_t k = 0; k < group.size(); ++k) cache.release(group[k].held);
      group.clear();
    }
  } else {
    for (size_t i = 0; i < n_active; ++i) {
      const int32_t e = s.active[i];
      if (!group.empty() && !group.fits(e)) {
        group.run();
        group.clear();
      }
      group.add(GroupExpert{e, expert_weights(w, e, w.gate.expert(e), w.up.expert(e), w.down.expert(e)), 0});
    }
    if (!group.empty()) group.run();
  }

  // Slot order per token, whatever order the experts ran in. Latent experts
  // sum into s.moe_latent (their input is no longer needed), then go back up.
  float* sum = latent ? s.moe_latent.data() : s.out.data();
  for (int64_t t = 0; t < n; ++t) {
    float* o = &sum[t * width];
    std::fill(o, o + width, 0.0f);
    for (int64_t k = 0; k < n_used; ++k)
      ops::add_scaled(o, &s.slot_out[(t * n_used + k) * width], s.chosen_w[t * n_used + k], width);
    if (latent && !w.routed_norm.empty()) ops::rms_norm(o, w.routed_norm.data(), width, w.rms_eps, o);
  }
  if (latent) kernels::matmul(w.routed_up, sum, n, s.out.data(), *s.pool, s.mm);
  trace(s, "ffn_moe_out", w.layer, s.out.data(), w.router.cols);
  if (w.has_shared) add_shared_experts(w, s);
}

void deepseek_ffn_tensors(TensorTable& t, const std::string& p, const Hparams& hp, int64_t il, DeepseekFfn& f,
                          Presence selection, int64_t shared_width) {
  const int64_t d = hp.n_embd;
  f.is_moe = il >= hp.n_layer_dense_lead;
  if (!f.is_moe) {
    ffn_tensors(t, p, "", hp.n_ff, d, f.dense);
    f.dense.act = FfnActivation::of(hp);
    return;
  }
  moe_tensors(t, p, hp, f.moe, {.router = std::nullopt, .selection = selection});
  if (shared_width < 0) shared_width = hp.n_expert_shared * hp.n_ff_expert;
  if (shared_width > 0) {
    f.moe.has_shared = true;
    ffn_tensors(t, p, "_shexp", shared_width, d, f.moe.shared);
    f.moe.shared.act = FfnActivation::of(hp);
  }
}

int64_t deepseek_ffn_width(const Hparams& hp, int64_t shared_width) {
  if (shared_width < 0) shared_width = hp.n_expert_shared * hp.n_ff_expert;
  return std::max({hp.n_layer_dense_lead > 0 ? hp.n_ff : 0, hp.n_ff_expert, shared_width});
}

void deepseek_ffn(const DeepseekFfn& f, ForwardState& s) {
  if (f.is_moe)
    moe_ffn(f.moe, s);
  else
    gated_ffn(f.dense, s.xn.data(), s.n, s.ff_a.data(), s.ff_b.data(), s.out.data(), s);
}

}  // namespace ns
