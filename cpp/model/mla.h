#pragma once
// Multi-head Latent Attention (DeepSeek-V2/V3). The cache keeps one latent row per token:
// kv_a_layernorm(compressed kv) followed by the rotated shared key. Every query (decode, MTP
// verify, prefill chunk) attends in the absorbed form: W_UK folded into the query, attention over
// the latent rows, W_UV applied after.
// Tensor parallel: each rank owns num_attention_heads / size heads (q_b_proj / q_proj and
// kv_b_proj rows, o_proj columns); the down projections, norms and the latent cache are
// replicated. The output is this rank's partial o_proj sum: the caller all-reduces it.
#include <ATen/core/Tensor.h>

#include <optional>
#include <string>

#include "dist/tensor_parallel.h"
#include "kernels/kernel_ops.h"
#include "model/model_config.h"
#include "model/rms_norm.h"
#include "model/rotary_embedding.h"
#include "model/weights.h"

namespace mtpserve {

// The rows of a forward whose output is read, where that is fewer than its rows (an MTP fill reads each
// sequence's last row): every row still writes its latent-cache row, and the block after that write runs on
// these rows alone.
struct OutputRows {
  at::Tensor rows;                              // int64 indices into the forward's rows
  const kernels::AttentionMetadata* attention;  // those rows' attention, each seeing what it sees in the forward
};

// The rows of `t` that `out` names (all of them without it).
at::Tensor output_rows(const at::Tensor& t, const OutputRows* out);

class MultiHeadLatentAttention {
 public:
  MultiHeadLatentAttention(const ModelConfig& config, const Weights& weights, const std::string& prefix,
                           const TensorParallel& tp = {});

  // The output of every row, or of `out`'s rows alone.
  at::Tensor operator()(const at::Tensor& x, const at::Tensor& positions, const RotaryEmbedding& rope,
                        const at::Tensor& cache, const kernels::AttentionMetadata& meta,
                        const OutputRows* out = nullptr) const;

 private:
  // Queries [rows, heads, qk] of every row of x, or of `out`'s rows.
  at::Tensor project_queries(const at::Tensor& x, const at::Tensor& down, const OutputRows* out) const;

  int64_t heads_;  // this rank's heads
  int64_t q_lora_rank_, nope_dim_, rope_dim_, v_dim_, kv_lora_rank_;
  double scale_;
  std::optional<at::Tensor> q_proj_, q_b_proj_;
  std::optional<RMSNorm> q_a_layernorm_;
  // q_a_proj (when q_lora_rank > 0) and kv_a_proj_with_mqa stacked: both read x, so one GEMM.
  at::Tensor down_proj_;
  at::Tensor o_proj_;
  RMSNorm kv_a_layernorm_;
  at::Tensor w_uk_;    // [heads, nope_dim, kv_lora_rank]
  at::Tensor w_uv_t_;  // [heads, kv_lora_rank, v_dim]
  const kernels::KernelOps* ops_;
};

}  // namespace mtpserve
