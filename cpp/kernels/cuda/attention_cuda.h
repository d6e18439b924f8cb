#pragma once
#include "kernels/attention.h"

namespace mtpserve::kernels::cuda {

void write_latent_cache(const at::Tensor& cache, const at::Tensor& rows, const at::Tensor& slot_mapping);
at::Tensor mla_attention(const at::Tensor& q, const at::Tensor& cache, const AttentionMetadata& meta,
                         int64_t kv_lora_rank, double scale);
// The same attention with KV splits fixed by the cache's capacity (fixed_kv_splits): row-invariant.
at::Tensor mla_attention_batch_invariant(const at::Tensor& q, const at::Tensor& cache, const AttentionMetadata& meta,
                                         int64_t kv_lora_rank, double scale);

}  // namespace mtpserve::kernels::cuda
