#pragma once
// Absorbed MLA over the paged latent cache (see kernels/attention.h for the semantics). All query
// rows x heads of one sequence are flattened into entries e = row * heads + head; a block takes 64
// consecutive entries of one sequence and reads each KV row once for all of them, so the k + 1 rows
// of an MTP verify meet the KV together. Long contexts are split over blocks (flash-decoding) and
// merged by a second kernel (on Hopper at 512 + 64 with a few splits, by the attention kernel's own blocks). bf16/fp16 with kv_lora_rank + rope_dim in {512 + 64, 64 + 16} run on
// tensor cores (512 + 64 through wgmma on compute capability 9.0: mla_attention_wgmma.cuh); every other
// shape and fp32 run on an exact fp32 SIMT kernel.
#include "kernels/cuda/dtype.cuh"

namespace mtpserve::kernels::cuda {

struct MlaAttentionLaunch {
  const void* q;                // [tokens, heads, dim] contiguous, dim = kv_lora + rope
  const void* cache;            // [cache_rows, dim] (num_blocks * block_size rows), q's dtype
  const int32_t* block_tables;  // [num_seqs, table_width]
  const int32_t* query_start;   // [num_seqs + 1]
  const int32_t* context_lens;  // [num_seqs]
  void* out;                    // [tokens, heads, kv_lora]
  float* partial;               // [splits, tokens * heads, kv_lora] when splits > 1, else null
  float* lse;                   // [splits, tokens * heads] log2-sum-exp of each split, when splits > 1
  int64_t tokens, heads, dim, kv_lora, num_seqs, table_width, block_size, max_query_len;
  int64_t cache_rows;    // num_blocks * block_size
  int32_t splits;        // from mla_attention_splits or fixed_kv_splits
  int32_t split_tokens;  // > 0: split z covers KV positions [z, z + 1) * split_tokens (fixed_kv_splits)
  float scale;
  DType dtype;
};

// How many KV splits the launch uses: more when few blocks would otherwise fill the GPU, 1 for short
// contexts and for the SIMT kernel. `sm_count` is multiprocessor_count() of the launch's device.
int mla_attention_splits(const MlaAttentionLaunch& p, int64_t max_context_len, int sm_count);

// Batch-invariant splits (--batch_invariant): boundaries at fixed multiples of a split length that
// depends on the cache's capacity alone, so a query row meets the same KV splits, in the same order,
// in every step whatever the other sequences and its own number of query rows; splits with nothing
// visible to a row contribute exactly nothing to its combine. Sets p.splits and p.split_tokens.
void fixed_kv_splits(MlaAttentionLaunch& p, int64_t max_context_len, int64_t cache_rows);

cudaError_t launch_mla_attention(const MlaAttentionLaunch& p, cudaStream_t stream);

}  // namespace mtpserve::kernels::cuda
