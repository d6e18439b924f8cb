#pragma once
// The split-KV combine: out = sum_z w_z O_z / sum_z w_z over a row's splits z, w_z = 2^(lse_z - max lse), added
// in split order. One arithmetic serves the combine kernel (mla_attention.cu), which reads the partials from
// global memory, and the Hopper kernel's in-kernel combine (mla_cluster_combine.cuh), which reads them from its
// shared memory, where the cluster's blocks sent them: a row's output does not depend on which of the two ran it.
// Both put each row's weights in shared memory and load every split's partial of a thread's columns, then sum the
// partials column by column. Global loads go through L2 (ld.cg).
#include <cmath>

#include "kernels/cuda/mla_attention.cuh"
#include "kernels/cuda/mla_attention_tile.cuh"

namespace mtpserve::kernels::cuda::split_combine {

// A row's split weights into w[0, splits) (shared memory), worked out by one warp, lane z taking split z (at most
// 32 splits): 2^(lse_z - max), 0 for a split with nothing visible to the row (lse = -inf, its partial never
// written). Returns 1 / their sum in every lane, 0 when every split is empty; the sum adds the weights in split
// order. `lse(z)` reads split z's lse; every lane of the warp calls this.
template <typename Lse>
__device__ __forceinline__ float warp_weights(int splits, const Lse& lse, float* w) {
  const int lane = static_cast<int>(threadIdx.x & 31);
  const float e = lane < splits ? lse(lane) : -INFINITY;
  float top = e;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, offset));
  if (lane < splits) w[lane] = e == -INFINITY ? 0.0f : exp2f(e - top);
  __syncwarp();
  float total = 0.0f;
  for (int z = 0; z < splits; ++z) total += w[z];
  return total > 0.0f ? 1.0f / total : 0.0f;
}

// Split z's lse of row `row`, from global memory.
__device__ __forceinline__ float global_lse(const MlaAttentionLaunch& p, int z, int64_t row) {
  return __ldcg(p.lse + z * p.tokens * p.heads + row);
}

// Row `row`'s partials in global memory: split z's four fp32 values at column c are at(z, c).
struct GlobalPartials {
  const float* first;  // split 0's values of the row
  int64_t stride;      // floats from one split's partials to the next's
  __device__ GlobalPartials(const MlaAttentionLaunch& p, int64_t row)
      : first(p.partial + row * p.kv_lora), stride(p.tokens * p.heads * p.kv_lora) {}
  __device__ float4 at(int z, int c) const { return __ldcg(reinterpret_cast<const float4*>(first + z * stride + c)); }
};

// acc += w x for one split's four values: explicit fmaf, so every caller rounds alike.
__device__ __forceinline__ void add_split(float4& acc, float w, const float4& x) {
  acc.x = fmaf(w, x.x, acc.x);
  acc.y = fmaf(w, x.y, acc.y);
  acc.z = fmaf(w, x.z, acc.z);
  acc.w = fmaf(w, x.w, acc.w);
}

// Four value columns of the summed splits times 1 / the weights' sum, in T (16-bit: one 8-byte store, so a warp's
// stores fill whole sectors).
template <typename T>
__device__ __forceinline__ void store4(T* out, const float4& acc, float inv) {
  static_assert(sizeof(T) == 2, "the split KV runs on the tensor-core kernels: bf16 or fp16");
  *reinterpret_cast<uint2*>(out) = make_uint2(mla_tile::pack2<T>(acc.x * inv, acc.y * inv),
                                              mla_tile::pack2<T>(acc.z * inv, acc.w * inv));
}

// Every split's four fp32 values at columns col + step v (v < V) of one row, from `partial(z, c)`, into x: all
// loaded before any is used, so the loads make one round trip to where the partials are. Splits from `splits` to
// N load nothing (they are never summed).
template <int N, int V, typename Partial>
__device__ __forceinline__ void load_partials(int splits, const Partial& partial, int col, int step,
                                              float4 (&x)[N][V]) {
#pragma unroll
  for (int z = 0; z < N; ++z) {
#pragma unroll
    for (int v = 0; v < V; ++v) x[z][v] = z < splits ? partial(z, col + v * step) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
}

// The row's value columns [col + step v, col + step v + 4) for v < V into `out` (the row's output): the splits'
// partials x summed in split order with their weights w, skipping those of weight 0 (their partials may never have
// been written), times `inv`, 1 / the weights' sum. Lanes of a warp given consecutive `col`s write contiguous runs.
template <typename T, int N, int V>
__device__ __forceinline__ void store_combined(int splits, const float4 (&x)[N][V], const float* w, float inv, T* out,
                                               int col, int step) {
  float4 acc[V];
#pragma unroll
  for (int v = 0; v < V; ++v) acc[v] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
  for (int z = 0; z < N; ++z) {
    if (z >= splits || w[z] == 0.0f) continue;
#pragma unroll
    for (int v = 0; v < V; ++v) add_split(acc[v], w[z], x[z][v]);
  }
#pragma unroll
  for (int v = 0; v < V; ++v) store4<T>(out + col + v * step, acc[v], inv);
}

}  // namespace mtpserve::kernels::cuda::split_combine
