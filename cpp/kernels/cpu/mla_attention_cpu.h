#pragma once
#include <ATen/core/Tensor.h>

#include <vector>

#include "kernels/attention_metadata.h"

namespace mtpserve::kernels::cpu {

at::Tensor mla_absorbed_attention(const at::Tensor& q, const at::Tensor& cache, const AttentionMetadata& meta,
                                  const std::vector<int64_t>& seqs, int64_t kv_lora_rank, double scale);

}  // namespace mtpserve::kernels::cpu
