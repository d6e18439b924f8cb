#pragma once
// Attention kernels over the paged latent cache [num_blocks, block_size, kv_lora_rank + rope_dim].
// Every device implements these under kernels/<device>/ and registers them in its KernelOps.
#include <ATen/core/Tensor.h>

#include "kernels/attention_metadata.h"

namespace mtpserve::kernels {

// Stores rows [tokens, cache_dim] at cache row slot_mapping[t] (rows with a negative slot are
// skipped), converting to the cache's dtype.
using WriteLatentCacheFn = void (*)(const at::Tensor& cache, const at::Tensor& rows, const at::Tensor& slot_mapping);

// Absorbed-form MLA for every sequence of the step. q is [tokens, heads, kv_lora_rank + rope_dim]
// (query already multiplied into the latent space, rotary part last). All query rows of a sequence
// (query_len x heads) meet the sequence's KV together, each KV row read once; row i of a sequence
// with query length n and context c sees positions <= c - n + i. With n = 1 this is decode
// attention, with n = k + 1 the fused MTP verify attention, with a long n a prefill chunk.
// Softmax in fp32 with `scale`; returns [tokens, heads, kv_lora_rank] in q's dtype.
using MlaAttentionFn = at::Tensor (*)(const at::Tensor& q, const at::Tensor& cache, const AttentionMetadata& meta,
                                      int64_t kv_lora_rank, double scale);

}  // namespace mtpserve::kernels
