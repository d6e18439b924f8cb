#pragma once
#include "kernels/attention.h"

namespace mtpserve::kernels::npu {

void write_latent_cache(const at::Tensor& cache, const at::Tensor& rows, const at::Tensor& slot_mapping);

// Absorbed MLA through torch_npu's npu_fused_infer_attention_score.
at::Tensor fused_infer_mla_attention(const at::Tensor& q, const at::Tensor& cache, const AttentionMetadata& meta,
                                     int64_t kv_lora_rank, double scale);

}  // namespace mtpserve::kernels::npu
