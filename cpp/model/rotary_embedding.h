#pragma once
// Rotary embedding over interleaved pairs (x0, x1), (x2, x3), ... with optional YaRN scaling.
// Rotated pairs are written de-interleaved (all first members, then all second members);
// queries and keys share the layout, so their dot products are the reference's.
#include <ATen/core/Tensor.h>

#include "kernels/kernel_ops.h"
#include "model/model_config.h"

namespace mtpserve {

class RotaryEmbedding {
 public:
  explicit RotaryEmbedding(const ModelConfig& config);

  // x: [tokens, ..., rope_dim]; positions: [tokens] int64.
  at::Tensor operator()(const at::Tensor& x, const at::Tensor& positions) const;
  // The multiplier YaRN puts on the softmax scale (mscale_all_dim squared), 1 otherwise.
  double softmax_scale_factor() const { return softmax_scale_factor_; }
  // The tables, for the ops that rotate inside a fused launch (kernels/latent_kv.h).
  const at::Tensor& cos() const { return cos_; }
  const at::Tensor& sin() const { return sin_; }
  // Moves the tables to `device` and runs on its kernels from then on.
  void to(const at::Device& device);

 private:
  at::Tensor cos_;  // [max_positions, rope_dim / 2] float32
  at::Tensor sin_;
  double softmax_scale_factor_ = 1.0;
  bool batch_invariant_ = false;
  const kernels::KernelOps* ops_ = nullptr;
};

}  // namespace mtpserve
