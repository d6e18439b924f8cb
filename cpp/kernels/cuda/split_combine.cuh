#pragma once
// The split-KV combine: out = sum_z w_z O_z / sum_z w_z over a row's splits z, w_z = 2^(lse_z - max lse), added
// in split order. One arithmetic serves the combine kernel (mla_attention.cu), which reads the partials from
// global memory, and the Hopper kernel's in-kernel combine (mla_cluster_combine.cuh), which reads them from its
// shared memory, where the cluster's blocks sent them: a row's output does not depend on which of the two ran it.
// Both first put each row's weights in shared memory, then sum the partials column by column. Global loads go
// through L2 (ld.cg).
#include <cmath>

#include "kernels/cuda/mla_attention.cuh"
#include "kernels/cuda/mla_attention_tile.cuh"

namespace mtpserve::kernels::cuda::split_combine {

constexpr int kBatch = 8;  // splits whose loads are issued before any is used

// A row's split weights into w[0, splits) from `lse(z)`: 2^(lse_z - max), 0 for a split with nothing visible to
// the row (lse = -inf, its partial never written). Returns 1 / their sum, 0 when every split is empty.
template <typename Lse>
__device__ __forceinline__ float weights(int splits, const Lse& lse, float* w) {
  float top = -INFINITY;
  for (int z0 = 0; z0 < splits; z0 += kBatch) {
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      if (z0 + j < splits) w[z0 + j] = lse(z0 + j);
    }
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      if (z0 + j < splits) top = fmaxf(top, w[z0 + j]);
    }
  }
  float total = 0.0f;
  for (int z = 0; z < splits; ++z) {
    w[z] = w[z] == -INFINITY ? 0.0f : exp2f(w[z] - top);
    total += w[z];
  }
  return total > 0.0f ? 1.0f / total : 0.0f;
}

// Row `row`'s weights, its lse from global memory.
__device__ __forceinline__ float row_weights(const MlaAttentionLaunch& p, int64_t row, float* w) {
  const int64_t rows_total = p.tokens * p.heads;
  return weights(p.splits, [&](int z) { return __ldcg(p.lse + z * rows_total + row); }, w);
}

// Four value columns in T (16-bit: one 8-byte store, so a warp's stores fill whole sectors).
template <typename T>
__device__ __forceinline__ void store4(T* out, const float4& v) {
  static_assert(sizeof(T) == 2, "the split KV runs on the tensor-core kernels: bf16 or fp16");
  *reinterpret_cast<uint2*>(out) = make_uint2(mla_tile::pack2<T>(v.x, v.y), mla_tile::pack2<T>(v.z, v.w));
}

// Value columns [col + step v, col + step v + 4) for v < V of one row into `out` (the row's output), from its
// weights `w`, 1 / their sum and `partial(z, c)`, the four fp32 values of split z's partial at column c: explicit
// fmaf, splits in order, so every V and caller rounds alike. Lanes of a warp given consecutive `col`s read and
// write contiguous runs.
template <typename T, int V, typename Partial>
__device__ __forceinline__ void combine(int splits, const Partial& partial, T* out, int col, int step, const float* w,
                                        float inv) {
  float4 acc[V];
#pragma unroll
  for (int v = 0; v < V; ++v) acc[v] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int z0 = 0; z0 < splits; z0 += kBatch) {
    float4 x[kBatch][V];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int z = z0 + j;
      const bool used = z < splits && w[z] != 0.0f;
#pragma unroll
      for (int v = 0; v < V; ++v) x[j][v] = used ? partial(z, col + v * step) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int z = z0 + j;
      if (z >= splits || w[z] == 0.0f) continue;
#pragma unroll
      for (int v = 0; v < V; ++v) {
        acc[v].x = fmaf(w[z], x[j][v].x, acc[v].x);
        acc[v].y = fmaf(w[z], x[j][v].y, acc[v].y);
        acc[v].z = fmaf(w[z], x[j][v].z, acc[v].z);
        acc[v].w = fmaf(w[z], x[j][v].w, acc[v].w);
      }
    }
  }
#pragma unroll
  for (int v = 0; v < V; ++v) {
    store4<T>(out + col + v * step, make_float4(acc[v].x * inv, acc[v].y * inv, acc[v].z * inv, acc[v].w * inv));
  }
}

// combine() of row `row`, its partials from global memory.
template <typename T, int V>
__device__ __forceinline__ void combine_columns(const MlaAttentionLaunch& p, int64_t row, int col, int step,
                                                const float* w, float inv) {
  const int64_t rows_total = p.tokens * p.heads;
  const int kv = static_cast<int>(p.kv_lora);
  const auto partial = [&](int z, int c) {
    return __ldcg(reinterpret_cast<const float4*>(p.partial + (z * rows_total + row) * kv + c));
  };
  combine<T, V>(p.splits, partial, static_cast<T*>(p.out) + row * kv, col, step, w, inv);
}

}  // namespace mtpserve::kernels::cuda::split_combine
