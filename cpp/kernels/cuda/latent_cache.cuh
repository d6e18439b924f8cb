#pragma once
// Stores new latent rows into the paged cache in one launch, converting to the cache's dtype.
#include "kernels/cuda/dtype.cuh"

namespace mtpserve::kernels::cuda {

struct LatentCacheWriteLaunch {
  void* cache;                  // [cache_rows, dim]
  const void* rows;             // [tokens, dim] contiguous
  const int64_t* slot_mapping;  // [tokens]: cache row of each token; negative (padding) or >= cache_rows: skipped
  int64_t tokens, dim, cache_rows;
  DType cache_dtype, rows_dtype;
};
cudaError_t launch_write_latent_cache(const LatentCacheWriteLaunch& p, cudaStream_t stream);

}  // namespace mtpserve::kernels::cuda
