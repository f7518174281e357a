#include "engine/layers/yarn_rope.h"

#include <algorithm>
#include <cmath>

namespace ns {
namespace {

constexpr float kPi = 3.14159265358979323846f;

// The dim at which a rotation completes n_rot turns over n_ctx_orig positions.
float corr_dim(int64_t n_dims, int64_t n_ctx_orig, float n_rot, float base) {
  return static_cast<float>(n_dims) * std::log(static_cast<float>(n_ctx_orig) / (n_rot * 2 * kPi)) /
         (2 * std::log(base));
}

float yarn_mscale(float scale, float mscale) { return scale <= 1.0f ? 1.0f : 0.1f * mscale * std::log(scale) + 1.0f; }

}  // namespace

float yarn_attn_factor(const Hparams& hp) {
  float attn_factor = 1.0f;
  if (hp.yarn_ext_factor != 0.0f) {
    const float factor = 1.0f / hp.rope_freq_scale;
    // YarnMscale::mscale_all_dim: the reference keeps yarn_log_multiplier as
    // mscale_all_dim (the stored 0.1 * mscale_all_dim divided by 0.1).
    const bool all_dim = hp.yarn_mscale == YarnMscale::mscale_all_dim;
    const float log_mul = all_dim ? hp.yarn_log_mul / 0.1f : hp.yarn_log_mul;
    if (log_mul != 0.0f) {
      const float mscale = all_dim && log_mul != 1.0f ? log_mul : 1.0f;
      attn_factor = yarn_mscale(factor, mscale) / yarn_mscale(factor, log_mul);
    } else {
      attn_factor = yarn_mscale(factor, 1.0f);
    }
    // The rope kernel multiplies by 1 + 0.1 ln(factor) again when ext_factor != 0: cancel it.
    attn_factor *= 1.0f / (1.0f + 0.1f * std::log(factor));
  }
  return attn_factor * hp.rope_attn_factor;
}

RopeParams rope_params(const Hparams& hp) {
  RopeParams p;
  p.n_dims = hp.rope_dim;
  p.type = hp.rope_type;
  p.base = hp.rope_base;
  p.freq_scale = hp.rope_scaling == RopeScaling::none ? 1.0f : hp.rope_freq_scale;
  p.ext_factor = hp.yarn_ext_factor;
  p.attn_factor = yarn_attn_factor(hp);
  const int64_t n_ctx_orig = hp.rope_n_ctx_orig > 0 ? hp.rope_n_ctx_orig : hp.n_ctx_train;
  const float start = std::floor(corr_dim(p.n_dims, n_ctx_orig, hp.yarn_beta_fast, p.base));
  const float end = std::ceil(corr_dim(p.n_dims, n_ctx_orig, hp.yarn_beta_slow, p.base));
  p.corr_dims[0] = std::max(0.0f, start);
  p.corr_dims[1] = std::min(static_cast<float>(p.n_dims - 1), end);
  for (int i = 0; i < 4; ++i) p.sections[i] = hp.rope_sections[i];
  return p;
}

void apply_rope(float* v, int64_t n_heads, int64_t head_stride, int64_t pos, const RopeParams& p) {
  const int64_t half = p.n_dims / 2;
  const float theta_scale = std::pow(p.base, -2.0f / static_cast<float>(p.n_dims));
  float mscale = p.attn_factor;
  if (p.ext_factor != 0.0f) mscale *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
  const int64_t* sec = p.sections;
  const int64_t sect_dims = sec[0] + sec[1] + sec[2] + sec[3];
  float theta_extrap = static_cast<float>(pos);
  for (int64_t i = 0; i < half; ++i, theta_extrap *= theta_scale) {
    float theta_pos = theta_extrap;
    if (p.type == RopeType::imrope && sect_dims > 0) {
      const int64_t sector = i % sect_dims;
      const bool text = (sector % 3 == 0 && sector < 3 * sec[0]) || (sector % 3 == 1 && sector < 3 * sec[1]) ||
                        (sector % 3 == 2 && sector < 3 * sec[2]);
      if (!text) theta_pos = 0.0f;  // the fourth section: position 0
    }
    float theta = p.freq_scale * theta_pos;
    if (p.ext_factor != 0.0f) {
      const float y = (static_cast<float>(i) - p.corr_dims[0]) / std::max(0.001f, p.corr_dims[1] - p.corr_dims[0]);
      const float ramp_mix = (1.0f - std::min(1.0f, std::max(0.0f, y))) * p.ext_factor;
      theta = theta * (1.0f - ramp_mix) + theta_pos * ramp_mix;
    }
    const float c = std::cos(theta) * mscale, s = std::sin(theta) * mscale;
    // norm: adjacent pairs (2i, 2i+1); neox: (i, i + n_dims/2).
    const int64_t a = p.type == RopeType::norm ? 2 * i : i;
    const int64_t b = p.type == RopeType::norm ? 2 * i + 1 : i + half;
    for (int64_t h = 0; h < n_heads; ++h) {  // contracted as the reference's compiler does (see ops::rope)
      float* x = v + h * head_stride;
      const float x0 = x[a], x1 = x[b];
      x[a] = std::fma(x0, c, -(x1 * s));
      x[b] = std::fma(x0, s, x1 * c);
    }
  }
}

}  // namespace ns
