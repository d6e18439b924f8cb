#pragma once
// Dot products over one warp in a fixed order: lane l takes the 16-byte chunks l, l + 32, ... of the
// reduction dim, accumulates each chunk's elements in index order with fmaf, and the lanes are summed
// by one xor butterfly. Each result depends only on its two operand rows and the length n, so a row's
// value is the same whatever the other rows computed beside it: the expert GEMVs and the row-invariant
// GEMMs (--batch_invariant) are built on this.
#include "kernels/cuda/dtype.cuh"

namespace mtpserve::kernels::cuda {

// Elements of T in one 16-byte load.
template <typename T>
constexpr int kChunkElems = 16 / static_cast<int>(sizeof(T));

template <typename T>
struct alignas(16) Chunk {
  T v[kChunkElems<T>];
};

template <typename T>
__device__ __forceinline__ Chunk<T> load_chunk(const T* p) {
  return *reinterpret_cast<const Chunk<T>*>(p);
}

// out[m][r] = x[m] . w[r] for the first `x_rows` rows of x and the R rows of w, n elements each; n a
// multiple of kChunkElems<T> and every row 16-byte aligned. Every lane ends with every result. Rows
// m >= x_rows are left 0 and read nothing. Two column steps are in flight at once: a warp's loads are
// what hides the memory latency of these bandwidth-bound kernels.
template <typename T, int M, int R>
__device__ __forceinline__ void warp_dot_rows(const T* const (&x)[M], int x_rows, const T* const (&w)[R], int64_t n,
                                              float (&out)[M][R]) {
  constexpr int E = kChunkElems<T>;
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int r = 0; r < R; ++r) out[m][r] = 0.0f;
  }
#pragma unroll 2
  for (int64_t col = threadIdx.x % 32 * E; col < n; col += 32 * E) {
    Chunk<T> ws[R];
#pragma unroll
    for (int r = 0; r < R; ++r) ws[r] = load_chunk(w[r] + col);
#pragma unroll
    for (int m = 0; m < M; ++m) {
      if (m >= x_rows) break;
      const Chunk<T> xs = load_chunk(x[m] + col);
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const float xe = to_float(xs.v[e]);
#pragma unroll
        for (int r = 0; r < R; ++r) out[m][r] = fmaf(xe, to_float(ws[r].v[e]), out[m][r]);
      }
    }
  }
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      for (int offset = 16; offset > 0; offset /= 2) out[m][r] += __shfl_xor_sync(0xffffffffu, out[m][r], offset);
    }
  }
}

// warp_dot_rows over rows x_stride (x) and w_stride (w) elements apart.
template <typename T, int M, int R>
__device__ __forceinline__ void warp_dot_tile(const T* x, int64_t x_stride, int x_rows, const T* w, int64_t w_stride,
                                              int64_t n, float (&out)[M][R]) {
  const T* xs[M];
  const T* ws[R];
#pragma unroll
  for (int m = 0; m < M; ++m) xs[m] = x + m * x_stride;
#pragma unroll
  for (int r = 0; r < R; ++r) ws[r] = w + r * w_stride;
  warp_dot_rows<T, M, R>(xs, x_rows, ws, n, out);
}

}  // namespace mtpserve::kernels::cuda
