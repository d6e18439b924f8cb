#pragma once
// Attention kernels over the paged latent cache [num_blocks, block_size, kv_lora_rank + rope_dim].
// One interface; each device provides its implementation under kernels/<device>/.
#include <ATen/core/Tensor.h>

#include <vector>

#include "kernels/attention_metadata.h"

namespace mtpserve::kernels {

// Stores one latent row per new token at its slot.
void write_latent_cache(const at::Tensor& cache, const at::Tensor& rows, const at::Tensor& slot_mapping);

// The first `len` cached rows of sequence `seq`, in position order: [len, cache_dim].
at::Tensor gather_latent(const at::Tensor& cache, const AttentionMetadata& meta, int64_t seq, int64_t len);

// Absorbed-form MLA for the sequences in `seqs`. q is [num_tokens, heads, kv_lora_rank + rope_dim]
// (query already multiplied into the latent space, rotary part last). All query rows of a
// sequence (query_len x heads) are computed together against the sequence's KV, which is read
// once; row i sees positions <= context_len - query_len + i. This is the fused MTP attention of
// the verify step and plain decode attention when query_len is 1.
// Returns [sum of the sequences' query lengths, heads, kv_lora_rank], in the order of `seqs`.
at::Tensor mla_absorbed_attention(const at::Tensor& q, const at::Tensor& cache, const AttentionMetadata& meta,
                                  const std::vector<int64_t>& seqs, int64_t kv_lora_rank, double scale);

}  // namespace mtpserve::kernels
