#pragma once
// Attention kernels over the paged latent cache [num_blocks, block_size, kv_lora_rank + rope_dim].
// Every device implements these under kernels/<device>/ and registers them in its KernelOps.
#include <ATen/core/Tensor.h>

#include "kernels/attention_metadata.h"

namespace mtpserve::kernels {

// Stores rows [tokens, cache_dim] at cache row slot_mapping[t] (rows with a negative slot are
// skipped), converting to the cache's dtype.
using WriteLatentCacheFn = void (*)(const at::Tensor& cache, const at::Tensor& rows, const at::Tensor& slot_mapping);

// The new tokens' latent rows straight from the kv projection, in one launch: for kv [tokens,
// kv_lora_rank + rope_dim] (rows may be strided, e.g. a slice of the fused down projection), stores
// rms_norm(kv[:, :kv_lora_rank], norm_weight, eps) followed by rotary(kv[:, kv_lora_rank:], positions,
// cos, sin) at cache row slot_mapping[t] (negative slots skipped): the values those ops and
// write_latent_cache give. kv, norm_weight and the cache share one dtype (write_latent_kv() in
// kernels/latent_kv.h composes the separate ops otherwise, and where a device has no fused op).
using WriteLatentKvFn = void (*)(const at::Tensor& cache, const at::Tensor& kv, const at::Tensor& norm_weight,
                                 double eps, const at::Tensor& positions, const at::Tensor& cos,
                                 const at::Tensor& sin, const at::Tensor& slot_mapping);

// Absorbed-form MLA for every sequence of the step. q is [tokens, heads, kv_lora_rank + rope_dim]
// (query already multiplied into the latent space, rotary part last). All query rows of a sequence
// (query_len x heads) meet the sequence's KV together, each KV row read once; row i of a sequence
// with query length n and context c sees positions <= c - n + i. With n = 1 this is decode
// attention, with n = k + 1 the fused MTP verify attention, with a long n a prefill chunk.
// Softmax in fp32 with `scale`; returns [tokens, heads, kv_lora_rank] in q's dtype.
using MlaAttentionFn = at::Tensor (*)(const at::Tensor& q, const at::Tensor& cache, const AttentionMetadata& meta,
                                      int64_t kv_lora_rank, double scale);

}  // namespace mtpserve::kernels
