#pragma once
// The split-KV combine: out = sum_z w_z O_z / sum_z w_z over a row's splits z, w_z = 2^(lse_z - max lse), added
// in split order. One arithmetic serves the combine kernel (mla_attention.cu) and the Hopper kernel's in-kernel
// combine (mla_attention_wgmma.cu), so a row's output does not depend on which of the two ran it. Both first put
// each row's weights in shared memory, then sum the partials column by column. Loads go through L2 (ld.cg): in
// the in-kernel combine other blocks of the same grid wrote the partials.
#include <cmath>

#include "kernels/cuda/mla_attention.cuh"
#include "kernels/cuda/mla_attention_tile.cuh"

namespace mtpserve::kernels::cuda::split_combine {

constexpr int kBatch = 8;  // splits whose loads are issued before any is used

// Row `row`'s split weights into w[0, splits): 2^(lse_z - max), 0 for a split with nothing visible to the row
// (lse = -inf, its partial never written). Returns 1 / their sum, 0 when every split is empty.
__device__ __forceinline__ float row_weights(const MlaAttentionLaunch& p, int64_t row, float* w) {
  const int64_t rows_total = p.tokens * p.heads;
  float top = -INFINITY;
  for (int z0 = 0; z0 < p.splits; z0 += kBatch) {
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      if (z0 + j < p.splits) w[z0 + j] = __ldcg(p.lse + (z0 + j) * rows_total + row);
    }
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      if (z0 + j < p.splits) top = fmaxf(top, w[z0 + j]);
    }
  }
  float total = 0.0f;
  for (int z = 0; z < p.splits; ++z) {
    w[z] = w[z] == -INFINITY ? 0.0f : exp2f(w[z] - top);
    total += w[z];
  }
  return total > 0.0f ? 1.0f / total : 0.0f;
}

// Four value columns in T (16-bit: one 8-byte store, so a warp's stores fill whole sectors).
template <typename T>
__device__ __forceinline__ void store4(T* out, const float4& v) {
  static_assert(sizeof(T) == 2, "the split KV runs on the tensor-core kernels: bf16 or fp16");
  *reinterpret_cast<uint2*>(out) = make_uint2(mla_tile::pack2<T>(v.x, v.y), mla_tile::pack2<T>(v.z, v.w));
}

// Value columns [col + step v, col + step v + 4) for v < V of row `row`, from its weights `w` and 1 / their sum:
// explicit fmaf, splits in order, so every V and caller rounds alike. Lanes of a warp given consecutive `col`s
// read and write contiguous runs.
template <typename T, int V>
__device__ __forceinline__ void combine_columns(const MlaAttentionLaunch& p, int64_t row, int col, int step,
                                                const float* w, float inv) {
  const int64_t rows_total = p.tokens * p.heads;
  const int kv = static_cast<int>(p.kv_lora);
  float4 acc[V];
#pragma unroll
  for (int v = 0; v < V; ++v) acc[v] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int z0 = 0; z0 < p.splits; z0 += kBatch) {
    float4 x[kBatch][V];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int z = z0 + j;
      const bool used = z < p.splits && w[z] != 0.0f;
      const float* src = p.partial + (z * rows_total + row) * kv + col;
#pragma unroll
      for (int v = 0; v < V; ++v) {
        x[j][v] = used ? __ldcg(reinterpret_cast<const float4*>(src + v * step)) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
    }
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int z = z0 + j;
      if (z >= p.splits || w[z] == 0.0f) continue;
#pragma unroll
      for (int v = 0; v < V; ++v) {
        acc[v].x = fmaf(w[z], x[j][v].x, acc[v].x);
        acc[v].y = fmaf(w[z], x[j][v].y, acc[v].y);
        acc[v].z = fmaf(w[z], x[j][v].z, acc[v].z);
        acc[v].w = fmaf(w[z], x[j][v].w, acc[v].w);
      }
    }
  }
  T* out = static_cast<T*>(p.out) + row * kv + col;
#pragma unroll
  for (int v = 0; v < V; ++v) {
    store4<T>(out + v * step, make_float4(acc[v].x * inv, acc[v].y * inv, acc[v].z * inv, acc[v].w * inv));
  }
}

}  // namespace mtpserve::kernels::cuda::split_combine
