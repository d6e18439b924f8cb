#pragma once
// Pre-norm decoder block: MLA then a dense MLP or an MoE, each with a residual. Tensor parallel:
// one all-reduce after attention's o_proj and one after the MLP / MoE.
#include <ATen/core/Tensor.h>

#include <optional>
#include <string>

#include "model/mla.h"
#include "model/mlp.h"
#include "model/moe.h"

namespace mtpserve {

class DecoderLayer {
 public:
  DecoderLayer(const ModelConfig& config, const Weights& weights, int64_t layer, const TensorParallel& tp = {});
  // The stream after this block: its MLP / MoE output is left pending for the next norm to add. With `out`,
  // every row writes its latent-cache row and the stream continues for `out`'s rows alone.
  Residual operator()(const Residual& in, const at::Tensor& positions, const RotaryEmbedding& rope,
                      const at::Tensor& cache, const kernels::AttentionMetadata& meta,
                      const OutputRows* out = nullptr) const;

 private:
  TensorParallel tp_;
  RMSNorm input_norm_, post_attention_norm_;
  MultiHeadLatentAttention attention_;
  std::optional<DenseMLP> mlp_;
  std::optional<MoE> moe_;
};

}  // namespace mtpserve
