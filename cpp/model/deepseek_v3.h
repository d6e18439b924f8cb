#pragma once
// DeepSeek-V3 target model: embed -> L x decoder layer -> final norm -> lm_head. Tensor parallel:
// the embedding is replicated, the layers are sharded, and lm_head is vocab-parallel (each rank
// holds vocab / size rows; logits() all-gathers the full rows).
#include <ATen/core/Tensor.h>

#include <vector>

#include "model/decoder_layer.h"

namespace mtpserve {

class DeepSeekV3 {
 public:
  DeepSeekV3(const ModelConfig& config, const Weights& weights, const TensorParallel& tp = {});

  // Final-norm hidden states [tokens, hidden]; writes every layer's latent cache (one per layer).
  at::Tensor forward(const at::Tensor& token_ids, const at::Tensor& positions, const std::vector<at::Tensor>& caches,
                     const kernels::AttentionMetadata& meta) const;
  // Full-vocabulary logits on every rank.
  at::Tensor logits(const at::Tensor& hidden) const;

  const ModelConfig& config() const { return config_; }
  const RotaryEmbedding& rope() const { return rope_; }
  const at::Tensor& embedding() const { return embed_; }
  const at::Tensor& lm_head() const { return lm_head_; }  // this rank's vocab rows
  const TensorParallel& tp() const { return tp_; }

 private:
  ModelConfig config_;
  TensorParallel tp_;
  RotaryEmbedding rope_;
  at::Tensor embed_, lm_head_;
  std::vector<DecoderLayer> layers_;
  RMSNorm norm_;
  const kernels::KernelOps* ops_;
};

}  // namespace mtpserve
