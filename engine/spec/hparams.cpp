#include "engine/spec/hparams.h"

#include <algorithm>

#include "engine/gguf/gguf_file.h"
#include "common/error.h"
#include "engine/spec/metadata_keys.h"

namespace ns {

void bad_hparam(const gguf::GgufFile& f, const std::string& key, const std::string& why) {
  throw Error(ErrorKind::bad_model, f.path() + ": metadata key '" + key + "' " + why);
}

int64_t optional_hparam_count(const gguf::GgufFile& f, const std::string& key, uint64_t max) {
  const uint64_t v = f.get_u64_or(key, 0);
  if (v > max) bad_hparam(f, key, "is " + std::to_string(v) + ", expected at most " + std::to_string(max));
  return static_cast<int64_t>(v);
}

void read_swiglu_clamps(const gguf::GgufFile& f, const std::string& a, Hparams& h) {
  const int64_t blocks = h.n_layer + h.n_layer_nextn;
  const auto per_block = [&](const std::string& key) {
    std::vector<float> out;
    const gguf::Value* v = f.find(a + key);
    if (v == nullptr) return out;
    if (v->type == gguf::ValueType::ARRAY)
      out = f.get_f32_array(a + key);
    else
      out.assign(static_cast<size_t>(blocks), static_cast<float>(f.get_f64(a + key)));
    if (static_cast<int64_t>(out.size()) < blocks) bad_hparam(f, a + key, "has fewer entries than block_count");
    return out;
  };
  h.swiglu_clamp_exp = per_block(keys::swiglu_clamp_exp);
  h.swiglu_clamp_shexp = per_block(keys::swiglu_clamp_shexp);
}

namespace {

[[noreturn]] void bad(const gguf::GgufFile& f, const std::string& key, const std::string& why) {
  bad_hparam(f, key, why);
}

int64_t positive(const gguf::GgufFile& f, const std::string& key, uint64_t max = 1ull << 31) {
  const uint64_t v = f.get_u64(key);
  if (v == 0 || v > max) bad(f, key, "is " + std::to_string(v) + ", expected 1.." + std::to_string(max));
  return static_cast<int64_t>(v);
}

int64_t optional_count(const gguf::GgufFile& f, const std::string& key, uint64_t max) {
  return optional_hparam_count(f, key, max);
}

// Shared experts, leading dense layers, the gating function, weight
// normalization and scaling, group-limited selection (MoE models only).
void read_moe_routing(const gguf::GgufFile& f, const std::string& a, const ArchTraits& traits, Hparams& h) {
  h.n_expert_shared = optional_count(f, a + keys::expert_shared_count, 1 << 16);
  h.n_ff_shexp = optional_count(f, a + keys::expert_shared_feed_forward_length, 1 << 24);
  h.n_layer_dense_lead = optional_count(f, a + keys::leading_dense_block_count, static_cast<uint64_t>(h.n_layer));
  switch (f.get_u64_or(a + keys::expert_gating_func, 0)) {
    case 0:  // absent ("none"): the architecture's default (ArchTraits::default_gating)
      h.expert_gating = traits.default_gating;
      break;
    case 1: h.expert_gating = ExpertGating::softmax; break;
    case 2: h.expert_gating = ExpertGating::sigmoid; break;
    case 4: h.expert_gating = ExpertGating::sqrt_softplus; break;
    default:
      bad(f, a + keys::expert_gating_func,
          "is " + std::to_string(f.get_u64(a + keys::expert_gating_func)) +
              ", supported: 1 (softmax), 2 (sigmoid), 4 (sqrtsoftplus)");
  }
  h.expert_weights_norm = f.get_bool_or(a + keys::expert_weights_norm, false);
  h.expert_weights_scale = static_cast<float>(f.get_f64_or(a + keys::expert_weights_scale, 0.0));
  if (!(h.expert_weights_scale >= 0 && h.expert_weights_scale < 1e6))
    bad(f, a + keys::expert_weights_scale, "must be in [0, 1e6)");
  h.n_expert_groups = optional_count(f, a + keys::expert_group_count, static_cast<uint64_t>(h.n_expert));
  h.n_group_used = optional_count(f, a + keys::expert_group_used_count, static_cast<uint64_t>(h.n_expert));
  if (h.n_expert_groups > 1) {
    const std::string g = a + keys::expert_group_count;
    if (h.n_expert % h.n_expert_groups != 0)
      bad(f, g,
          "(" + std::to_string(h.n_expert_groups) + ") must divide expert_count (" + std::to_string(h.n_expert) + ")");
    if (h.n_expert_groups > 1024) bad(f, g, "is " + std::to_string(h.n_expert_groups) + ", at most 1024 supported");
    if (h.n_group_used < 1 || h.n_group_used > h.n_expert_groups)
      bad(f, a + keys::expert_group_used_count,
          "must be between 1 and expert_group_count (" + std::to_string(h.n_expert_groups) + ")");
    if (h.n_group_used * (h.n_expert / h.n_expert_groups) < h.n_expert_used)
      bad(f, a + keys::expert_group_used_count,
          "leaves fewer experts to choose from than expert_used_count (" + std::to_string(h.n_expert_used) + ")");
  }
}

// rope.scaling.*: none, linear (positions divided by the factor) or YaRN.
void read_rope_scaling(const gguf::GgufFile& f, const std::string& a, Hparams& h) {
  const std::string scaling = f.get_string_or(a + keys::rope_scaling_type, "none");
  if (scaling == "none") {
    h.rope_scaling = RopeScaling::none;
  } else if (scaling == "linear" || scaling == "yarn") {
    h.rope_scaling = scaling == "linear" ? RopeScaling::linear : RopeScaling::yarn;
    const double factor = f.get_f64_or(a + keys::rope_scaling_factor, 1.0);
    if (!(factor > 0 && factor < 1e6)) bad(f, a + keys::rope_scaling_factor, "must be positive");
    h.rope_freq_scale = static_cast<float>(1.0 / factor);
  } else {
    bad(f, a + keys::rope_scaling_type, "'" + scaling + "' is not supported (supported: none, linear, yarn)");
  }
  h.rope_n_ctx_orig = static_cast<int64_t>(
      f.get_u64_or(a + keys::rope_scaling_original_context_length, static_cast<uint64_t>(h.n_ctx_train)));
  h.rope_attn_factor = static_cast<float>(f.get_f64_or(a + keys::rope_scaling_attn_factor, 1.0));
  h.yarn_ext_factor = static_cast<float>(
      f.get_f64_or(a + keys::rope_scaling_yarn_ext_factor, h.rope_scaling == RopeScaling::yarn ? 1.0 : 0.0));
  h.yarn_beta_fast = static_cast<float>(f.get_f64_or(a + keys::rope_scaling_yarn_beta_fast, 32.0));
  h.yarn_beta_slow = static_cast<float>(f.get_f64_or(a + keys::rope_scaling_yarn_beta_slow, 1.0));
  h.yarn_log_mul = static_cast<float>(f.get_f64_or(a + keys::rope_scaling_yarn_log_multiplier, 0.0));
  if (h.rope_scaling == RopeScaling::yarn && h.rope_n_ctx_orig <= 0)
    bad(f, a + keys::rope_scaling_original_context_length, "must be positive for YaRN");
  if (!(h.yarn_ext_factor >= 0 && h.yarn_ext_factor <= 1))
    bad(f, a + keys::rope_scaling_yarn_ext_factor, "must be in [0, 1]");
}

// Multi-head latent attention ranks and head sizes (deepseek2).
void read_mla(const gguf::GgufFile& f, const std::string& a, Hparams& h) {
  h.q_lora_rank = optional_count(f, a + keys::attention_q_lora_rank, 1 << 20);
  h.kv_lora_rank = optional_count(f, a + keys::attention_kv_lora_rank, 1 << 20);
  h.head_dim_k_mla = optional_count(f, a + keys::attention_key_length_mla, 1 << 16);
  h.head_dim_v_mla = optional_count(f, a + keys::attention_value_length_mla, 1 << 16);
  if ((h.head_dim_k_mla > 0) != (h.head_dim_v_mla > 0))
    bad(f, a + (h.head_dim_k_mla > 0 ? keys::attention_value_length_mla : keys::attention_key_length_mla),
        "is missing: key_length_mla and value_length_mla come together");
}

// attention.head_count_kv: one number, or one per layer (hybrid models mark
// their recurrent layers with 0; at least one layer must have attention heads).
void read_head_count_kv(const gguf::GgufFile& f, const std::string& a, Hparams& h) {
  const std::string key = a + keys::attention_head_count_kv;
  const gguf::Value* v = f.find(key);
  if (v == nullptr) {
    h.n_head_kv = h.n_head;
    return;
  }
  if (v->type == gguf::ValueType::ARRAY) {
    // One per block, the NextN blocks included (bailingmoe3's converter writes them all).
    const std::vector<int32_t> per_layer = f.get_i32_array(key);
    const int64_t blocks = h.n_layer + h.n_layer_nextn;
    if (static_cast<int64_t>(per_layer.size()) != blocks)
      bad(f, key,
          "has " + std::to_string(per_layer.size()) + " entries, expected one per block (" + std::to_string(blocks) +
              ")");
    for (size_t il = 0; il < per_layer.size(); ++il) {
      const int32_t n = per_layer[il];
      if (n < 0 || n > 4096 || (n > 0 && h.n_head % n != 0))
        bad(f, key,
            "entry " + std::to_string(il) + " is " + std::to_string(n) +
                ", expected 0 (a recurrent layer) or a divisor of head_count (" + std::to_string(h.n_head) + ")");
      h.n_head_kv_layers.push_back(n);
      h.n_head_kv = std::max<int64_t>(h.n_head_kv, n);
    }
    return;
  }
  h.n_head_kv = positive(f, key, 4096);
  if (h.n_head % h.n_head_kv != 0)
    bad(f, key, "(" + std::to_string(h.n_head_kv) + ") must divide head_count (" + std::to_string(h.n_head) + ")");
}

// Kimi Delta Attention layers (kimi-linear, kimi-k3): short-convolution taps,
// head size, the decay gate's form.
void read_kda(const gguf::GgufFile& f, const std::string& a, Hparams& h) {
  h.ssm_d_conv = optional_count(f, a + keys::ssm_conv_kernel, 64);
  h.kda_head_dim = optional_count(f, a + keys::kda_head_dim, 1 << 12);
  if (f.has(a + keys::kda_gate_lower_bound)) {
    h.kda_gate_lower_bound = static_cast<float>(f.get_f64(a + keys::kda_gate_lower_bound));
    if (!(h.kda_gate_lower_bound < 0)) bad(f, a + keys::kda_gate_lower_bound, "must be negative");
  }
}

// Gated DeltaNet layers: the ssm.* sizes (which layers are recurrent is the
// architecture's layer pattern, read by its ArchTraits::read_keys).
void read_gated_delta_net(const gguf::GgufFile& f, const std::string& a, Hparams& h) {
  h.ssm_d_state = optional_count(f, a + keys::ssm_state_size, 1 << 12);
  h.ssm_n_group = optional_count(f, a + keys::ssm_group_count, 1 << 12);
  h.ssm_dt_rank = optional_count(f, a + keys::ssm_time_step_rank, 1 << 12);
  h.ssm_d_inner = optional_count(f, a + keys::ssm_inner_size, 1 << 24);
}

// Sliding-window attention: the window, which layers use it, their RoPE base.
void read_sliding_window(const gguf::GgufFile& f, const std::string& a, const ArchTraits& traits, Hparams& h) {
  h.rope_base_swa = static_cast<float>(f.get_f64_or(a + keys::rope_freq_base_swa, h.rope_base));
  if (!(h.rope_base_swa > 1)) bad(f, a + keys::rope_freq_base_swa, "must be greater than 1");
  h.n_swa = optional_count(f, a + keys::attention_sliding_window, 1u << 31);
  if (h.n_swa == 0) return;
  const std::string key = a + keys::attention_sliding_window_pattern;
  const gguf::Value* v = f.find(key);
  if (v != nullptr && v->type == gguf::ValueType::ARRAY) {
    if (static_cast<int64_t>(v->arr.size()) != h.n_layer)
      bad(f, key,
          "has " + std::to_string(v->arr.size()) + " entries, expected one per layer (" + std::to_string(h.n_layer) +
              ")");
    for (const gguf::Value& e : v->arr) {
      if (e.type != gguf::ValueType::BOOL && !e.is_integer()) bad(f, key, "should be an array of booleans");
      h.swa_layers.push_back(e.u != 0 || e.i != 0);
    }
    return;
  }
  // The period the reference's loader uses for the architecture when the key is absent;
  // without one no layer slides.
  if (v == nullptr && traits.default_swa_period == 0) return;
  const uint64_t n = v != nullptr ? f.get_u64(key) : static_cast<uint64_t>(traits.default_swa_period);
  if (n > static_cast<uint64_t>(h.n_layer)) bad(f, key, "is " + std::to_string(n) + ", more than block_count");
  for (int64_t il = 0; il < h.n_layer; ++il) h.swa_layers.push_back(n == 0 || static_cast<uint64_t>(il) % n < n - 1);
}

}  // namespace

Hparams Hparams::from_gguf(const gguf::GgufFile& f, const ArchTraits& traits) {
  Hparams h;
  h.arch = f.get_string("general.architecture");
  h.name = f.get_string_or("general.name", "");
  const std::string a = h.arch + ".";
  h.n_embd = positive(f, a + keys::embedding_length, 1 << 20);
  h.n_layer = positive(f, a + keys::block_count, 4096);
  h.n_layer_nextn = optional_count(f, a + keys::nextn_predict_layers, static_cast<uint64_t>(h.n_layer - 1));
  h.n_layer -= h.n_layer_nextn;
  h.n_head = positive(f, a + keys::attention_head_count, 4096);
  read_head_count_kv(f, a, h);
  h.head_dim = f.has(a + keys::attention_key_length) ? positive(f, a + keys::attention_key_length, 1 << 16)
                                                     : h.n_embd / h.n_head;
  if (h.head_dim == 0) bad(f, a + keys::attention_head_count, "is larger than embedding_length");
  h.head_dim_v =
      f.has(a + keys::attention_value_length) ? positive(f, a + keys::attention_value_length, 1 << 16) : h.head_dim;
  h.n_ff = f.has(a + keys::feed_forward_length) ? positive(f, a + keys::feed_forward_length, 1 << 24) : 0;
  const uint64_t context_length = f.get_u64_or(a + keys::context_length, 2048);
  // Larger is no model's length, and would wrap the KV cache's arithmetic
  // (a length up to this one is sized, and refused by the memory plan).
  if (context_length > (uint64_t{1} << 40))
    bad(f, a + keys::context_length, "is " + std::to_string(context_length) + "; at most 2^40 supported");
  h.n_ctx_train = static_cast<int64_t>(context_length);
  h.n_expert = static_cast<int64_t>(f.get_u64_or(a + keys::expert_count, 0));
  if (h.n_expert > 0) {
    if (h.n_expert > (1 << 16))
      bad(f, a + keys::expert_count, "is " + std::to_string(h.n_expert) + ", at most 65536 supported");
    h.n_expert_used = positive(f, a + keys::expert_used_count, static_cast<uint64_t>(h.n_expert));
    const std::string ff_expert = a + keys::expert_feed_forward_length;
    h.n_ff_expert = f.has(ff_expert)    ? positive(f, ff_expert, 1 << 24)
                    : traits.split_n_ff ? h.n_ff / h.n_expert_used
                                        : h.n_ff;
    if (h.n_ff_expert <= 0)
      bad(f, a + keys::expert_feed_forward_length, "is missing and feed_forward_length does not give an expert size");
    read_moe_routing(f, a, traits, h);
  }
  h.rms_eps = static_cast<float>(f.get_f64_or(a + keys::attention_layer_norm_rms_epsilon, 1e-5));
  if (!(h.rms_eps > 0 && h.rms_eps < 1)) bad(f, a + keys::attention_layer_norm_rms_epsilon, "must be in (0, 1)");
  h.rope_dim = static_cast<int64_t>(f.get_u64_or(a + keys::rope_dimension_count, static_cast<uint64_t>(h.head_dim)));
  if (h.rope_dim <= 0 || h.rope_dim > h.head_dim || h.rope_dim % 2)
    bad(f, a + keys::rope_dimension_count,
        "is " + std::to_string(h.rope_dim) + ", expected an even number up to the head size " +
            std::to_string(h.head_dim));
  h.rope_base = static_cast<float>(f.get_f64_or(a + keys::rope_freq_base, 10000.0));
  if (!(h.rope_base > 1)) bad(f, a + keys::rope_freq_base, "must be greater than 1");
  read_rope_scaling(f, a, h);
  // Multimodal rotary sections (the reference's M-RoPE, GLM-4.5V's text model): positions are not one number.
  // (imrope's interleaved sections reduce to one position for text: the architecture's read_keys reads them.)
  h.rope_type = traits.rope_type;
  h.yarn_mscale = traits.yarn_mscale;
  if (h.rope_type != RopeType::imrope && f.has(a + keys::rope_dimension_sections)) {
    const std::vector<int32_t> sec = f.get_i32_array(a + keys::rope_dimension_sections);
    if (sec.size() >= 2 && sec[0] > 0 && sec[1] > 0)
      bad(f, a + keys::rope_dimension_sections,
          "asks for multimodal RoPE (M-RoPE), which is not supported; "
          "use a text-only conversion of the model");
  }
  read_mla(f, a, h);
  read_kda(f, a, h);
  read_gated_delta_net(f, a, h);
  if (traits.read_keys != nullptr) traits.read_keys(f, a, h);
  read_sliding_window(f, a, traits, h);
  if (h.rope_type == RopeType::imrope &&
      h.rope_sections[0] + h.rope_sections[1] + h.rope_sections[2] + h.rope_sections[3] == 0)
    bad(f, a + keys::rope_dimension_sections, "is missing (" + h.arch + " needs its interleaved rope sections)");
  return h;
}

}  // namespace ns
