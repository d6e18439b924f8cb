#include "kernels/cuda/latent_cache.cuh"

#include <type_traits>

namespace mtpserve::kernels::cuda {

namespace {

constexpr int kWriteThreads = 128;  // 4 warps, one token row each
constexpr int kRowsPerBlock = kWriteThreads / 32;

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Same dtype, 16-byte aligned rows: a row is copied as uint4 chunks by one warp.
__global__ void copy_rows_kernel(LatentCacheWriteLaunch p) {
  const int64_t token = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5);
  if (token >= p.tokens) return;
  const int64_t slot = p.slot_mapping[token];
  if (slot < 0 || slot >= p.cache_rows) return;
  const int64_t chunks = p.dim * (p.cache_dtype == DType::kFloat32 ? 4 : 2) / 16;
  const uint4* src = static_cast<const uint4*>(p.rows) + token * chunks;
  uint4* dst = static_cast<uint4*>(p.cache) + slot * chunks;
  for (int64_t i = threadIdx.x & 31; i < chunks; i += 32) dst[i] = src[i];
}

template <typename In, typename Out>
__global__ void convert_rows_kernel(LatentCacheWriteLaunch p) {
  const int64_t token = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5);
  if (token >= p.tokens) return;
  const int64_t slot = p.slot_mapping[token];
  if (slot < 0 || slot >= p.cache_rows) return;
  const In* src = static_cast<const In*>(p.rows) + token * p.dim;
  Out* dst = static_cast<Out*>(p.cache) + slot * p.dim;
  for (int64_t i = threadIdx.x & 31; i < p.dim; i += 32) dst[i] = from_float<Out>(to_float(src[i]));
}

}  // namespace

cudaError_t launch_write_latent_cache(const LatentCacheWriteLaunch& p, cudaStream_t stream) {
  if (p.tokens == 0) return cudaSuccess;
  const auto blocks = static_cast<unsigned>((p.tokens + kRowsPerBlock - 1) / kRowsPerBlock);
  const int64_t row_bytes = p.dim * (p.cache_dtype == DType::kFloat32 ? 4 : 2);
  if (p.cache_dtype == p.rows_dtype && row_bytes % 16 == 0 && aligned16(p.cache) && aligned16(p.rows)) {
    copy_rows_kernel<<<blocks, kWriteThreads, 0, stream>>>(p);
    return cudaGetLastError();
  }
  return dispatch(p.rows_dtype, [&](auto in) {
    return dispatch(p.cache_dtype, [&](auto out) {
      convert_rows_kernel<decltype(in), decltype(out)><<<blocks, kWriteThreads, 0, stream>>>(p);
      return cudaGetLastError();
    });
  });
}

}  // namespace mtpserve::kernels::cuda
