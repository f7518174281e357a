// Rotary position embedding as the reference's CPU kernel computes it,
// YaRN included: the angle of pair i at position p is p * base^(-2i/n_dims),
// accumulated in float one pair at a time; with YaRN (ext_factor > 0) the
// interpolated angle (times freq_scale) is blended with the extrapolated one
// on a ramp between the correction dims, and cos/sin are scaled by the
// magnitude factor. Without scaling this is plain RoPE.
//
// Used by the architectures that can carry YaRN metadata (deepseek2, qwen*moe,
// qwen3next, glm4moe). qwen35moe's interleaved multi-section RoPE (imrope) rotates pair
// i by the position of section (i mod sum(sections)) in the interleaved order
// t h w t h w ...; a text token has t = h = w = its position and the fourth
// section at 0, so imrope is neox rope with those fourth-section pairs held
// at angle 0.
#pragma once

#include <cstdint>

#include "engine/spec/hparams.h"

namespace ns {

struct RopeParams {
  int64_t n_dims = 0;  // rotated dims per head (rope.dimension_count)
  RopeType type = RopeType::norm;
  float base = 10000.0f;
  float freq_scale = 1.0f;
  float ext_factor = 0.0f;   // YaRN extrapolation mix (0: none)
  float attn_factor = 1.0f;  // magnitude applied to cos/sin (times YaRN's own correction when ext_factor != 0)
  float corr_dims[2] = {0, 0};
  int64_t sections[4] = {0, 0, 0, 0};  // imrope: rope.dimension_sections
};

// The reference's attn_factor for this model's rope: YaRN's magnitude
// correction, cancelled where the model scales attention itself
// (YarnMscale::mscale_all_dim: deepseek2), times rope.scaling.attn_factor.
float yarn_attn_factor(const Hparams& hp);

RopeParams rope_params(const Hparams& hp);

// Rotates the first p.n_dims values of n_heads vectors spaced head_stride
// floats apart, for position pos.
void apply_rope(float* v, int64_t n_heads, int64_t head_stride, int64_t pos, const RopeParams& p);

}  // namespace ns
