// The routed MoE block's selection rules, checked on hand-made F32 experts
// whose outputs reveal which experts ran and with what weight: expert e
// writes weight_e * silu(20) into output dim e and nothing elsewhere.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/layers/ffn.h"
#include "engine/util/thread_pool.h"

using namespace ns;

namespace {

constexpr int64_t kE = 8;  // experts = embedding width, so expert e can own output dim e
const float kSilu20 = 20.0f / (1.0f + std::exp(-20.0f));

struct TinyMoe {
  std::vector<float> router, gate, up, down, sh_gate, sh_up, sh_down;
  MoeWeights w;
  ThreadPool pool{1};
  ForwardState s;

  // Router logits for x = e_0 are the column `logits`.
  explicit TinyMoe(const std::vector<float>& logits) {
    router.assign(kE * kE, 0.0f);
    for (int64_t e = 0; e < kE; ++e) router[e * kE] = logits[e];
    gate.assign(kE * kE, 0.0f);  // [expert][1 row][kE]
    up.assign(kE * kE, 0.0f);
    down.assign(kE * kE, 0.0f);  // [expert][kE rows][1 col]
    for (int64_t e = 0; e < kE; ++e) {
      gate[e * kE] = 20.0f;
      up[e * kE] = 1.0f;
      down[e * kE + e] = 1.0f;
    }
    w.router = {gguf::GgmlType::F32, router.data(), kE, kE, kE * 4};
    w.gate = experts(gate, 1, kE);
    w.up = experts(up, 1, kE);
    w.down = experts(down, kE, 1);
    s.n = 1;
    s.max_batch = 1;
    s.xn.assign(kE, 0.0f);
    s.xn[0] = 1.0f;
    s.out.assign(kE, 0.0f);
    s.router.resize(kE);
    s.chosen.resize(kE);
    s.chosen_w.resize(kE);
    s.expert_count.resize(kE);
    s.expert_first.resize(kE);
    s.expert_rows.resize(kE);
    s.active.resize(2 * kE);
    s.ex_in.resize(kE);
    s.ex_out.resize(kE);
    s.slot_out.resize(kE * kE);  // [n][n_used <= kE][n_embd = kE]
    s.ex_a.resize(1);
    s.ex_b.resize(1);
    s.ff_a.resize(1);
    s.ff_b.resize(1);
    s.pool = &pool;
  }

  ExpertsView experts(std::vector<float>& v, int64_t rows, int64_t cols) {
    ExpertsView x;
    x.type = gguf::GgmlType::F32;
    x.data = reinterpret_cast<const uint8_t*>(v.data());
    x.n_expert = kE;
    x.rows = rows;
    x.cols = cols;
    x.row_stride = static_cast<size_t>(cols) * 4;
    x.expert_stride = static_cast<size_t>(rows * cols) * 4;
    return x;
  }

  // A shared expert writing silu(20) into output dim `dim`.
  void add_shared(int64_t dim) {
    sh_gate.assign(kE, 0.0f);
    sh_gate[0] = 20.0f;
    sh_up.assign(kE, 0.0f);
    sh_up[0] = 1.0f;
    sh_down.assign(kE, 0.0f);
    sh_down[dim] = 1.0f;
    w.has_shared = true;
    w.shared.gate = {gguf::GgmlType::F32, sh_gate.data(), 1, kE, kE * 4};
    w.shared.up = {gguf::GgmlType::F32, sh_up.data(), 1, kE, kE * 4};
    w.shared.down = {gguf::GgmlType::F32, sh_down.data(), kE, 1, 4};
  }

  // Per-expert weights recovered from the output.
  std::vector<float> run() {
    moe_ffn(w, s);
    std::vector<float> weights(kE);
    for (int64_t e = 0; e < kE; ++e) weights[e] = s.out[e] / kSilu20;
    return weights;
  }
};

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

}  // namespace

TEST_CASE("moe: softmax gating picks the top experts, weights are their probabilities") {
  const std::vector<float> logits = {0.1f, 2.0f, -1.0f, 1.5f, 0.3f, -0.5f, 0.0f, 0.2f};
  TinyMoe m(logits);
  m.w.n_used = 2;
  m.w.normalize_weights = false;
  m.w.gating = ExpertGating::softmax;
  const auto w = m.run();
  double sum = 0;
  for (float l : logits) sum += std::exp(l);
  CHECK(w[1] == doctest::Approx(std::exp(2.0) / sum).epsilon(1e-5));
  CHECK(w[3] == doctest::Approx(std::exp(1.5) / sum).epsilon(1e-5));
  for (int e : {0, 2, 4, 5, 6, 7}) CHECK(w[e] == 0.0f);
}

TEST_CASE("moe: the selection bias chooses experts but does not weight them; norm then scale") {
  const std::vector<float> logits = {1.0f, 0.9f, 0.8f, 0.0f, -1.0f, 0.5f, 0.2f, 0.1f};
  TinyMoe m(logits);
  m.w.n_used = 2;
  m.w.gating = ExpertGating::sigmoid;
  m.w.selection_bias = {0, 0, 0, 1.0f, 2.0f, 0, 0, 0};  // lifts experts 3 and 4 over 0 and 1
  m.w.normalize_weights = true;
  m.w.weights_scale = 2.5f;
  const auto w = m.run();
  const float p3 = sigmoid(0.0f), p4 = sigmoid(-1.0f);
  CHECK(w[3] == doctest::Approx(2.5 * p3 / (p3 + p4)).epsilon(1e-5));
  CHECK(w[4] == doctest::Approx(2.5 * p4 / (p3 + p4)).epsilon(1e-5));
  CHECK(w[0] == 0.0f);
  CHECK(w[1] == 0.0f);
}

TEST_CASE("moe: group-limited selection keeps to the groups whose two best scores sum highest") {
  // Groups {0,1} {2,3} {4,5} {6,7}: expert 0 is the single best, but group 0's
  // pair sums lowest of the groups used; groups {2,3} and {6,7} win.
  const std::vector<float> logits = {3.0f, -3.0f, 1.0f, 0.9f, -2.0f, -2.0f, 1.2f, 0.8f};
  TinyMoe m(logits);
  m.w.n_used = 3;
  m.w.gating = ExpertGating::sigmoid;
  m.w.normalize_weights = false;
  m.w.n_groups = 4;
  m.w.n_groups_used = 2;
  const auto w = m.run();
  CHECK(w[0] == 0.0f);  // best expert, excluded with its group
  CHECK(w[6] == doctest::Approx(sigmoid(1.2f)));
  CHECK(w[2] == doctest::Approx(sigmoid(1.0f)));
  CHECK(w[3] == doctest::Approx(sigmoid(0.9f)));
  CHECK(w[7] == 0.0f);

  m.w.n_groups = 0;  // without the limit expert 0 comes back
  const auto free = m.run();
  CHECK(free[0] == doctest::Approx(sigmoid(3.0f)));
}

TEST_CASE("moe: shared experts are always added, gated by sigmoid(gate_inp . x) when given") {
  const std::vector<float> logits = {0, 0, 0, 0, 0, 0, 3.0f, 2.0f};
  TinyMoe m(logits);
  m.w.n_used = 1;
  m.w.gating = ExpertGating::softmax;
  m.w.normalize_weights = true;
  m.add_shared(2);
  auto w = m.run();
  CHECK(w[6] == doctest::Approx(1.0f));
  CHECK(w[2] == doctest::Approx(1.0f));  // the shared expert, ungated

  m.w.shared_gate_inp.assign(kE, 0.0f);
  m.w.shared_gate_inp[0] = -0.7f;
  w = m.run();
  CHECK(w[2] == doctest::Approx(sigmoid(-0.7f)));
}
