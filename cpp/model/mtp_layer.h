#pragma once
// One DeepSeek MTP module: h' = block(eh_proj([enorm(embed(t_{i+1})); hnorm(h_i)])), with its own
// latent cache; logits = head(shared_head.norm(h')). Drafting k > 1 tokens reuses it on its
// own normed output.
#include <ATen/core/Tensor.h>

#include "model/decoder_layer.h"

namespace mtpserve {

class MtpLayer {
 public:
  // `layer` is the checkpoint index (num_hidden_layers + i). Checkpoints may omit the module's
  // copies of the embedding and head; the target model's are used then (target_head is the
  // target's vocab shard under tensor parallelism, sharded like the module's own head).
  MtpLayer(const ModelConfig& config, const Weights& weights, int64_t layer, const at::Tensor& target_embedding,
           const at::Tensor& target_head, const TensorParallel& tp = {});

  // Normed output hidden states [tokens, hidden] for (next token, previous hidden) pairs, or of `out`'s rows
  // alone (every pair still fills its row of the cache).
  at::Tensor forward(const at::Tensor& token_ids, const at::Tensor& previous_hidden, const at::Tensor& positions,
                     const RotaryEmbedding& rope, const at::Tensor& cache, const kernels::AttentionMetadata& meta,
                     const OutputRows* out = nullptr) const;
  // Full-vocabulary logits on every rank.
  at::Tensor logits(const at::Tensor& hidden) const { return tp_.all_gather_last_dim(ops_->linear(hidden, head_)); }

 private:
  TensorParallel tp_;
  at::Tensor embed_, head_, eh_proj_;
  RMSNorm enorm_, hnorm_, head_norm_;
  DecoderLayer block_;
  const kernels::KernelOps* ops_;
};

}  // namespace mtpserve
