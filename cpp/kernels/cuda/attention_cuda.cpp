#include "kernels/cuda/attention_cuda.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>

#include <string>

#include "kernels/cuda/device_info.cuh"
#include "kernels/cuda/latent_cache.cuh"
#include "kernels/cuda/mla_attention.cuh"
#include "kernels/cuda/piecewise_graph_cuda.h"
#include "kernels/cuda/tensor_args.h"

namespace mtpserve::kernels::cuda {

namespace {

// Launch grids put sequences and tiles on dims limited to 65535.
constexpr int64_t kMaxGridDim = 65535;
constexpr int64_t kTileEntries = 64;

void require_int32(const at::Tensor& t, int64_t dims, const at::Tensor& q, const char* name) {
  require(t.scalar_type() == at::kInt && t.dim() == dims && t.device() == q.device(),
          std::string("mla_attention: ") + name + " must be an int32 tensor with " + std::to_string(dims) +
              " dim(s) on q's device");
}

void check_attention_inputs(const at::Tensor& q, const at::Tensor& cache, const AttentionMetadata& meta,
                            int64_t kv_lora_rank) {
  require(q.dim() == 3 && cache.dim() == 3 && q.size(2) == cache.size(2),
          "mla_attention: q must be [tokens, heads, dim] and the cache [blocks, block_size, dim] with the same dim");
  require(cache.scalar_type() == q.scalar_type() && cache.device() == q.device(),
          "mla_attention: the cache must have q's dtype and device");
  require(cache.is_contiguous(), "mla_attention: the cache must be contiguous");
  require(kv_lora_rank > 0 && kv_lora_rank <= q.size(2), "mla_attention: kv_lora_rank must be in (0, dim]");
  require_int32(meta.block_tables, 2, q, "block_tables");
  require_int32(meta.query_start, 1, q, "query_start");
  require_int32(meta.context_lens, 1, q, "context_lens");
  require(meta.context_lens.size(0) == meta.num_seqs && meta.query_start.size(0) == meta.num_seqs + 1 &&
              meta.block_tables.size(0) == meta.num_seqs,
          "mla_attention: block_tables [seqs, W], query_start [seqs + 1] and context_lens [seqs] disagree on seqs");
  require(meta.max_query_len >= 0 && meta.max_context_len >= 0, "mla_attention: negative max lengths");
  require(meta.num_seqs <= kMaxGridDim &&
              (meta.max_query_len * q.size(1) + kTileEntries - 1) / kTileEntries <= kMaxGridDim,
          "mla_attention: at most 65535 sequences and 65535 * 64 query rows x heads per sequence");
}

}  // namespace

void write_latent_cache(const at::Tensor& cache, const at::Tensor& rows_in, const at::Tensor& slot_mapping) {
  c10::cuda::CUDAGuard guard(cache.device());
  require(cache.dim() == 3 && cache.is_contiguous(), "write_latent_cache: the cache must be a contiguous "
                                                     "[blocks, block_size, dim] tensor");
  require(rows_in.dim() == 2 && rows_in.size(1) == cache.size(2),
          "write_latent_cache: rows must be [tokens, dim] with the cache's dim");
  require(slot_mapping.dim() == 1 && slot_mapping.size(0) == rows_in.size(0) &&
              slot_mapping.scalar_type() == at::kLong,
          "write_latent_cache: slot_mapping must be int64 [tokens]");
  require(rows_in.device() == cache.device() && slot_mapping.device() == cache.device(),
          "write_latent_cache: cache, rows and slot_mapping must be on one device");
  auto rows = rows_in.contiguous();
  auto slots = slot_mapping.contiguous();
  LatentCacheWriteLaunch p{cache.data_ptr(), rows.data_ptr(), slots.data_ptr<int64_t>(), rows.size(0), rows.size(1),
                           cache.size(0) * cache.size(1), dtype_of(cache, "write_latent_cache"),
                           dtype_of(rows, "write_latent_cache")};
  check_launch(launch_write_latent_cache(p, stream_of(cache)), "write_latent_cache");
}

namespace {

// Both tables' attention: the fast one picks its KV splits per step, the batch-invariant one fixes them.
at::Tensor run_mla_attention(const at::Tensor& q_in, const at::Tensor& cache, const AttentionMetadata& meta,
                             int64_t kv_lora_rank, double scale, bool fixed_splits) {
  if (recording_pieces()) {  // a step with prompt tokens being recorded: its attention runs between the pieces
    return record_attention(q_in, [cache, kv_lora_rank, scale, fixed_splits](const at::Tensor& q,
                                                                              const AttentionMetadata& m) {
      return run_mla_attention(q, cache, m, kv_lora_rank, scale, fixed_splits);
    });
  }
  c10::cuda::CUDAGuard guard(q_in.device());
  check_attention_inputs(q_in, cache, meta, kv_lora_rank);
  const int64_t tokens = q_in.size(0), heads = q_in.size(1), dim = q_in.size(2);
  auto out = at::empty({tokens, heads, kv_lora_rank}, q_in.options());
  if (tokens == 0 || meta.num_seqs == 0) return out;
  auto q = q_in.contiguous();
  auto tables = meta.block_tables.contiguous();
  auto query_start = meta.query_start.contiguous();
  auto context_lens = meta.context_lens.contiguous();
  MlaAttentionLaunch p{.q = q.data_ptr(),
                       .cache = cache.data_ptr(),
                       .block_tables = tables.data_ptr<int32_t>(),
                       .query_start = query_start.data_ptr<int32_t>(),
                       .context_lens = context_lens.data_ptr<int32_t>(),
                       .out = out.data_ptr(),
                       .partial = nullptr,
                       .lse = nullptr,
                       .tokens = tokens,
                       .heads = heads,
                       .dim = dim,
                       .kv_lora = kv_lora_rank,
                       .num_seqs = meta.num_seqs,
                       .table_width = tables.size(1),
                       .block_size = cache.size(1),
                       .max_query_len = meta.max_query_len,
                       .cache_rows = cache.size(0) * cache.size(1),
                       .splits = 1,
                       .split_tokens = 0,
                       .scale = static_cast<float>(scale),
                       .dtype = dtype_of(q, "mla_attention")};
  if (fixed_splits) {
    fixed_kv_splits(p, meta.max_context_len, p.cache_rows);
  } else {
    p.splits = mla_attention_splits(p, meta.max_context_len, multiprocessor_count(q.device().index()));
  }
  at::Tensor workspace;
  if (p.splits > 1) {  // partial outputs [splits, tokens * heads, kv_lora], then lse [splits, tokens * heads]
    const int64_t rows = p.splits * tokens * heads;
    workspace = at::empty({rows * (kv_lora_rank + 1)}, q.options().dtype(at::kFloat));
    p.partial = workspace.data_ptr<float>();
    p.lse = p.partial + rows * kv_lora_rank;
  }
  check_launch(launch_mla_attention(p, stream_of(q)), "mla_attention");
  return out;
}

}  // namespace

at::Tensor mla_attention(const at::Tensor& q, const at::Tensor& cache, const AttentionMetadata& meta,
                         int64_t kv_lora_rank, double scale) {
  return run_mla_attention(q, cache, meta, kv_lora_rank, scale, /*fixed_splits=*/false);
}

at::Tensor mla_attention_batch_invariant(const at::Tensor& q, const at::Tensor& cache, const AttentionMetadata& meta,
                                         int64_t kv_lora_rank, double scale) {
  return run_mla_attention(q, cache, meta, kv_lora_rank, scale, /*fixed_splits=*/true);
}

}  // namespace mtpserve::kernels::cuda
