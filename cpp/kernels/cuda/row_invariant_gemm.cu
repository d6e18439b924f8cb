#include "kernels/cuda/row_invariant_gemm.cuh"

#include <algorithm>

#include "kernels/cuda/warp_dot.cuh"

namespace mtpserve::kernels::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kCols = kLinearColumnMultiple;  // output columns per warp
constexpr int kRows = 8;  // rows per block; kRows * kCols = 32: one lane stores each result
constexpr int kMaxGridY = 65535;

// Grid (column groups, row groups): warp w of block (bx, by) computes rows [8 by, 8 by + 8) x
// columns [4 (8 bx + w), ... + 4).
template <typename T>
__global__ void __launch_bounds__(kThreads) linear_kernel(RowInvariantLinearLaunch p, int64_t first_row) {
  const int lane = threadIdx.x % 32;
  const int64_t col0 = (static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32) * kCols;
  const int64_t row0 = first_row + static_cast<int64_t>(blockIdx.y) * kRows;
  if (col0 >= p.n) return;
  const int rows = static_cast<int>(min(static_cast<int64_t>(kRows), p.rows - row0));
  float acc[kRows][kCols];
  warp_dot_tile<T, kRows, kCols>(static_cast<const T*>(p.x) + row0 * p.x_stride, p.x_stride, rows,
                                 static_cast<const T*>(p.weight) + col0 * p.k, p.k, p.k, acc);
  const int r = lane / kCols, c = lane % kCols;
  if (r >= rows) return;
  T* out = static_cast<T*>(p.out) + (row0 + r) * p.n + col0 + c;
  *out = from_float<T>(acc[r][c]);
}

constexpr int kHeadRows = 8;  // rows per head-matmul block

// Grid (column blocks, heads, row groups): thread j of block (bx, h, by) computes out[t, h, 256 bx + j]
// for the block's 8 rows t, the reduction in index order.
template <typename T>
__global__ void __launch_bounds__(kThreads) head_matmul_kernel(RowInvariantHeadMatmulLaunch p, int64_t first_row) {
  __shared__ float xs[kHeadRows * kMaxHeadMatmulK];
  const int64_t head = blockIdx.y, row0 = first_row + static_cast<int64_t>(blockIdx.z) * kHeadRows;
  const int rows = static_cast<int>(min(static_cast<int64_t>(kHeadRows), p.rows - row0));
  const T* x = static_cast<const T*>(p.x) + row0 * p.x_row_stride + head * p.x_head_stride;
  for (int64_t i = threadIdx.x; i < rows * p.k; i += blockDim.x) {
    xs[i] = to_float(x[i / p.k * p.x_row_stride + i % p.k]);
  }
  __syncthreads();
  const int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col >= p.n) return;
  const T* w = static_cast<const T*>(p.weight) + head * p.k * p.n + col;
  float acc[kHeadRows];
#pragma unroll
  for (int r = 0; r < kHeadRows; ++r) acc[r] = 0.0f;
  for (int64_t i = 0; i < p.k; ++i) {
    const float wi = to_float(w[i * p.n]);
#pragma unroll
    for (int r = 0; r < kHeadRows; ++r) {
      if (r < rows) acc[r] = fmaf(xs[r * p.k + i], wi, acc[r]);
    }
  }
  T* out = static_cast<T*>(p.out) + (row0 * p.heads + head) * p.n + col;
#pragma unroll
  for (int r = 0; r < kHeadRows; ++r) {
    if (r < rows) out[r * p.heads * p.n] = from_float<T>(acc[r]);
  }
}

}  // namespace

cudaError_t launch_row_invariant_head_matmul(const RowInvariantHeadMatmulLaunch& p, cudaStream_t stream) {
  if (p.rows == 0 || p.n == 0 || p.heads == 0) return cudaSuccess;
  if (p.k > kMaxHeadMatmulK || p.heads > kMaxGridY) return cudaErrorInvalidValue;
  return dispatch(p.dtype, [&](auto t) {
    using T = decltype(t);
    const int threads = static_cast<int>(std::min<int64_t>(kThreads, (p.n + 31) / 32 * 32));
    const auto column_blocks = static_cast<unsigned>((p.n + threads - 1) / threads);
    const int64_t row_groups = (p.rows + kHeadRows - 1) / kHeadRows;
    for (int64_t g = 0; g < row_groups; g += kMaxGridY) {
      const auto groups = static_cast<unsigned>(std::min<int64_t>(kMaxGridY, row_groups - g));
      head_matmul_kernel<T><<<dim3(column_blocks, static_cast<unsigned>(p.heads), groups), threads, 0, stream>>>(
          p, g * kHeadRows);
      if (const cudaError_t status = cudaGetLastError(); status != cudaSuccess) return status;
    }
    return cudaSuccess;
  });
}

cudaError_t launch_row_invariant_linear(const RowInvariantLinearLaunch& p, cudaStream_t stream) {
  if (p.rows == 0 || p.n == 0) return cudaSuccess;
  return dispatch(p.dtype, [&](auto t) {
    using T = decltype(t);
    if (p.k % kChunkElems<T> != 0 || p.x_stride % kChunkElems<T> != 0 || p.n % kCols != 0) {
      return cudaErrorInvalidValue;
    }
    const auto column_groups = static_cast<unsigned>((p.n + kWarps * kCols - 1) / (kWarps * kCols));
    const int64_t row_groups = (p.rows + kRows - 1) / kRows;
    for (int64_t g = 0; g < row_groups; g += kMaxGridY) {
      const auto groups = static_cast<unsigned>(std::min<int64_t>(kMaxGridY, row_groups - g));
      linear_kernel<T><<<dim3(column_groups, groups), kThreads, 0, stream>>>(p, g * kRows);
      if (const cudaError_t status = cudaGetLastError(); status != cudaSuccess) return status;
    }
    return cudaSuccess;
  });
}

}  // namespace mtpserve::kernels::cuda
