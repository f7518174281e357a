// The GGUF metadata keys of an architecture's namespace ("<arch>.<key>"),
// spelled once: the engine reads them (Hparams::from_gguf, an
// architecture's ArchTraits::read_keys) and nightshift-make-model writes
// them (tools/make_model/arch_*.cpp), both through these names, so a key
// cannot be spelled one way by the writer and another by the reader.
//
// Contract: each entry is a `const char*` in ns::keys, the part after the
// "<arch>." prefix (`a + keys::block_count`); keys::all lists every entry
// (tests/unit/engine/metadata_keys_test.cpp checks that a generated file's
// "<arch>." keys are all in it). A new key is one line of NS_METADATA_KEYS.
// Keys outside an architecture's namespace (general.*, tokenizer.*) are not here.
#pragma once

#include <array>
#include <string_view>

// X(identifier, "the key after <arch>.")
#define NS_METADATA_KEYS(X)                                                       \
  /* the trunk */                                                                 \
  X(context_length, "context_length")                                             \
  X(embedding_length, "embedding_length")                                         \
  X(embedding_length_out, "embedding_length_out")                                 \
  X(block_count, "block_count")                                                   \
  X(feed_forward_length, "feed_forward_length")                                   \
  X(vocab_size, "vocab_size")                                                     \
  X(nextn_predict_layers, "nextn_predict_layers")                                 \
  X(attention_head_count, "attention.head_count")                                 \
  X(attention_head_count_kv, "attention.head_count_kv")                           \
  X(attention_key_length, "attention.key_length")                                 \
  X(attention_value_length, "attention.value_length")                             \
  X(attention_layer_norm_rms_epsilon, "attention.layer_norm_rms_epsilon")         \
  /* rope */                                                                      \
  X(rope_dimension_count, "rope.dimension_count")                                 \
  X(rope_dimension_sections, "rope.dimension_sections")                           \
  X(rope_freq_base, "rope.freq_base")                                             \
  X(rope_freq_base_swa, "rope.freq_base_swa")                                     \
  X(rope_scaling_type, "rope.scaling.type")                                       \
  X(rope_scaling_factor, "rope.scaling.factor")                                   \
  X(rope_scaling_original_context_length, "rope.scaling.original_context_length") \
  X(rope_scaling_attn_factor, "rope.scaling.attn_factor")                         \
  X(rope_scaling_yarn_ext_factor, "rope.scaling.yarn_ext_factor")                 \
  X(rope_scaling_yarn_beta_fast, "rope.scaling.yarn_beta_fast")                   \
  X(rope_scaling_yarn_beta_slow, "rope.scaling.yarn_beta_slow")                   \
  X(rope_scaling_yarn_log_multiplier, "rope.scaling.yarn_log_multiplier")         \
  /* MoE routing */                                                               \
  X(expert_count, "expert_count")                                                 \
  X(expert_used_count, "expert_used_count")                                       \
  X(expert_feed_forward_length, "expert_feed_forward_length")                     \
  X(expert_shared_count, "expert_shared_count")                                   \
  X(expert_shared_feed_forward_length, "expert_shared_feed_forward_length")       \
  X(leading_dense_block_count, "leading_dense_block_count")                       \
  X(expert_gating_func, "expert_gating_func")                                     \
  X(expert_weights_norm, "expert_weights_norm")                                   \
  X(expert_weights_scale, "expert_weights_scale")                                 \
  X(expert_group_count, "expert_group_count")                                     \
  X(expert_group_used_count, "expert_group_used_count")                           \
  X(expert_latent_length, "expert_latent_length")                                 \
  /* multi-head latent attention, the DSA indexer */                              \
  X(attention_q_lora_rank, "attention.q_lora_rank")                               \
  X(attention_kv_lora_rank, "attention.kv_lora_rank")                             \
  X(attention_key_length_mla, "attention.key_length_mla")                         \
  X(attention_value_length_mla, "attention.value_length_mla")                     \
  X(attention_indexer_head_count, "attention.indexer.head_count")                 \
  X(attention_indexer_key_length, "attention.indexer.key_length")                 \
  X(attention_indexer_top_k, "attention.indexer.top_k")                           \
  X(attention_indexer_types, "attention.indexer.types")                           \
  X(attention_indexer_block_size, "attention.indexer.block_size")                 \
  X(attention_indexer_local_blocks, "attention.indexer.local_blocks")             \
  /* sliding windows, recurrent layers (KDA, Gated DeltaNet) */                   \
  X(attention_sliding_window, "attention.sliding_window")                         \
  X(attention_sliding_window_pattern, "attention.sliding_window_pattern")         \
  X(attention_recurrent_layers, "attention.recurrent_layers")                     \
  X(full_attention_interval, "full_attention_interval")                           \
  X(ssm_conv_kernel, "ssm.conv_kernel")                                           \
  X(ssm_state_size, "ssm.state_size")                                             \
  X(ssm_group_count, "ssm.group_count")                                           \
  X(ssm_time_step_rank, "ssm.time_step_rank")                                     \
  X(ssm_inner_size, "ssm.inner_size")                                             \
  X(kda_head_dim, "kda.head_dim")                                                 \
  X(kda_gate_lower_bound, "kda.gate_lower_bound")                                 \
  X(kda_safe_gate, "kda.safe_gate")                                               \
  /* kimi-k3 */                                                                   \
  X(attn_res_block_size, "attn_res.block_size")                                   \
  X(activation_situ_beta, "activation.situ_beta")                                 \
  X(activation_situ_linear_beta, "activation.situ_linear_beta")                   \
  /* deepseek4 */                                                                 \
  X(hyper_connection_count, "hyper_connection.count")                             \
  X(hyper_connection_sinkhorn_iterations, "hyper_connection.sinkhorn_iterations") \
  X(hyper_connection_epsilon, "hyper_connection.epsilon")                         \
  X(hash_layer_count, "hash_layer_count")                                         \
  X(attention_output_group_count, "attention.output_group_count")                 \
  X(attention_output_lora_rank, "attention.output_lora_rank")                     \
  X(attention_compress_rope_freq_base, "attention.compress_rope_freq_base")       \
  X(attention_compress_ratios, "attention.compress_ratios")                       \
  X(swiglu_clamp_exp, "swiglu_clamp_exp")                                         \
  X(swiglu_clamp_shexp, "swiglu_clamp_shexp")

namespace ns::keys {

#define NS_METADATA_KEY_CONSTANT(id, name) inline constexpr const char* id = name;
NS_METADATA_KEYS(NS_METADATA_KEY_CONSTANT)
#undef NS_METADATA_KEY_CONSTANT

#define NS_METADATA_KEY_ENTRY(id, name) std::string_view{name},
inline constexpr std::array all = {NS_METADATA_KEYS(NS_METADATA_KEY_ENTRY)};
#undef NS_METADATA_KEY_ENTRY

}  // namespace ns::keys
