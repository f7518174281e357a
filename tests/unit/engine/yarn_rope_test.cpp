// RoPE with YaRN (engine/layers/yarn_rope) and deepseek2's attention scale:
// without scaling it is the plain rope of ops::rope to the bit; with YaRN the
// fast-turning pairs keep their angle, the slow ones are interpolated, and
// deepseek2's softmax scale carries mscale^2 while the rotation keeps unit norm.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "engine/arch/deepseek2.h"
#include "engine/layers/mla_attention.h"
#include "engine/layers/yarn_rope.h"
#include "engine/state/ops.h"

using namespace ns;

namespace {

Hparams deepseek_like(float factor, float log_mul) {
  Hparams hp;
  hp.arch = "deepseek2";
  hp.yarn_mscale = deepseek2_traits.yarn_mscale;
  hp.n_embd = 256;
  hp.n_head = 4;
  hp.head_dim = 48;  // legacy: key_length = nope + rope
  hp.head_dim_v = 32;
  hp.kv_lora_rank = 64;
  hp.rope_dim = 16;
  hp.rope_base = 10000.0f;
  hp.n_ctx_train = 163840;
  if (factor > 0) {
    hp.rope_scaling = RopeScaling::yarn;
    hp.rope_freq_scale = 1.0f / factor;
    hp.rope_n_ctx_orig = 4096;
    hp.yarn_ext_factor = 1.0f;
    hp.yarn_log_mul = log_mul;
  }
  return hp;
}

}  // namespace

TEST_CASE("rope without scaling is ops::rope exactly, norm and neox") {
  for (RopeType type : {RopeType::norm, RopeType::neox}) {
    Hparams hp = deepseek_like(0, 0);
    hp.rope_type = type;
    std::vector<float> a(3 * 16), b;
    for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.37f * static_cast<float>(i)) * 2.0f;
    b = a;
    apply_rope(a.data(), 3, 16, 1234, rope_params(hp));
    ops::rope(b.data(), 3, 16, 16, 1234, hp.rope_base, 1.0f, type);
    CHECK(a == b);
  }
}

TEST_CASE("YaRN keeps the fast pairs' angles, interpolates the slow ones, keeps the norm for deepseek2") {
  const float factor = 40.0f;
  const RopeParams p = rope_params(deepseek_like(factor, 0.1f));
  CHECK(p.corr_dims[0] >= 0);
  CHECK(p.corr_dims[1] <= 15);
  const int64_t pos = 1000;
  std::vector<float> v(16);
  for (int64_t i = 0; i < 8; ++i) {
    v[2 * i] = 1.0f;
    v[2 * i + 1] = 0.0f;
  }
  apply_rope(v.data(), 1, 16, pos, p);
  const double theta_scale = std::pow(10000.0, -2.0 / 16);
  auto angle = [&](int64_t i) { return std::atan2(double(v[2 * i + 1]), double(v[2 * i])); };
  auto wrap = [](double a) { return std::remainder(a, 2 * M_PI); };
  // Pair 0 turns fastest: extrapolated, the plain angle.
  CHECK(wrap(angle(0) - wrap(pos * 1.0)) == doctest::Approx(0).epsilon(1e-3));
  // Pair 7 turns slowest: interpolated, the angle divided by the factor.
  CHECK(angle(7) == doctest::Approx(pos * std::pow(theta_scale, 7) / factor).epsilon(1e-3));
  // deepseek2's yarn_log_multiplier cancels the rotation's magnitude factor...
  for (int64_t i = 0; i < 8; ++i) CHECK(std::hypot(v[2 * i], v[2 * i + 1]) == doctest::Approx(1.0).epsilon(1e-5));
  // ...and moves it to the softmax: mscale = 1 + 0.1 * mscale_all_dim * ln(factor), squared.
  const MlaShape sh = mla_shape(deepseek_like(factor, 0.1f));
  const double mscale = 1.0 + 0.1 * 1.0 * std::log(factor);
  CHECK(sh.kq_scale == doctest::Approx(mscale * mscale / std::sqrt(48.0)).epsilon(1e-5));
  CHECK(mla_shape(deepseek_like(0, 0)).kq_scale == doctest::Approx(1.0 / std::sqrt(48.0)));
}
