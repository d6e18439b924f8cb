#pragma once
// The hyper-parameters of a DeepSeek-V3 checkpoint that change the math.
// Parsed and validated from config.json by python/mtpserve/config.py.
#include <cstdint>
#include <string>

namespace mtpserve {

struct RopeScaling {
  std::string type = "default";  // "default" or "yarn"
  double factor = 1.0;
  int64_t original_max_position_embeddings = 4096;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double mscale = 0.0;          // 0 means "not given"
  double mscale_all_dim = 0.0;  // 0 means "not given"
};

struct ModelConfig {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t moe_intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_nextn_predict_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t q_lora_rank = 0;  // 0: the checkpoint has a plain q_proj
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  int64_t n_routed_experts = 0;  // 0: every layer is dense
  int64_t n_shared_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t first_k_dense_replace = 0;
  int64_t moe_layer_freq = 1;
  int64_t n_group = 1;
  int64_t topk_group = 1;
  bool norm_topk_prob = true;
  double routed_scaling_factor = 1.0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  int64_t max_position_embeddings = 4096;
  bool tie_word_embeddings = false;
  // Not from config.json: build the layers on the batch-invariant kernels (--batch_invariant).
  bool batch_invariant = false;

  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  // One latent-cache row: the compressed KV followed by the shared rotary key.
  int64_t cache_dim() const { return kv_lora_rank + qk_rope_head_dim; }
  // MTP layers sit at index >= num_hidden_layers and are always MoE, as in DeepSeek-V3.
  bool is_moe_layer(int64_t layer) const {
    if (n_routed_experts == 0) return false;
    if (layer >= num_hidden_layers) return true;
    return layer >= first_k_dense_replace && layer % moe_layer_freq == 0;
  }
};

}  // namespace mtpserve
