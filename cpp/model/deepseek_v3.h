#pragma once
// DeepSeek-V3 target model: embed -> L x decoder layer -> final norm -> lm_head.
#include <ATen/core/Tensor.h>

#include <vector>

#include "model/decoder_layer.h"

namespace mtpserve {

class DeepSeekV3 {
 public:
  DeepSeekV3(const ModelConfig& config, const Weights& weights);

  // Final-norm hidden states [tokens, hidden]; writes every layer's latent cache (one per layer).
  at::Tensor forward(const at::Tensor& token_ids, const at::Tensor& positions, const std::vector<at::Tensor>& caches,
                     const kernels::AttentionMetadata& meta) const;
  at::Tensor logits(const at::Tensor& hidden) const;

  const ModelConfig& config() const { return config_; }
  const RotaryEmbedding& rope() const { return rope_; }
  const at::Tensor& embedding() const { return embed_; }
  const at::Tensor& lm_head() const { return lm_head_; }

 private:
  ModelConfig config_;
  RotaryEmbedding rope_;
  at::Tensor embed_, lm_head_;
  std::vector<DecoderLayer> layers_;
  RMSNorm norm_;
};

}  // namespace mtpserve
