#pragma once
// GEMMs whose every output row is a function of its input row alone, bit for bit (--batch_invariant).
// cuBLAS picks its kernel (tiles, split-K) by the row count, so the same row rounds differently in a
// decode step (B rows) and in an MTP verify step (B (k + 1) rows) and a near-tie can flip. Here each
// output element has one fixed reduction order that depends on nothing but the reduction length: the
// price is cuBLAS's speed at many rows.
#include "kernels/cuda/dtype.cuh"

namespace mtpserve::kernels::cuda {

// out = x weight^T: each element a warp's dot product (warp_dot.cuh); a warp takes 4 output columns
// for 8 rows, so a weight chunk it loads serves all 8.
struct RowInvariantLinearLaunch {
  const void* x;       // [rows, k], rows x_stride apart
  const void* weight;  // [n, k] contiguous
  void* out;           // [rows, n] contiguous
  int64_t rows, n, k, x_stride;
  DType dtype;
};
// Needs k and x_stride multiples of 16 bytes of the dtype, n a multiple of 4, 16-byte aligned x and weight.
constexpr int64_t kLinearColumnMultiple = 4;
cudaError_t launch_row_invariant_linear(const RowInvariantLinearLaunch& p, cudaStream_t stream);

// out[t, h] = x[t, h] weight[h] per head: a thread per output column runs the reduction in index order
// for 8 rows at a time, reading the rows from shared memory.
struct RowInvariantHeadMatmulLaunch {
  const void* x;       // [rows, heads, k] with strides (x_row_stride, x_head_stride, 1)
  const void* weight;  // [heads, k, n] contiguous
  void* out;           // [rows, heads, n] contiguous
  int64_t rows, heads, k, n, x_row_stride, x_head_stride;
  DType dtype;
};
// The longest reduction the shared-memory row tile holds.
constexpr int64_t kMaxHeadMatmulK = 1536;
cudaError_t launch_row_invariant_head_matmul(const RowInvariantHeadMatmulLaunch& p, cudaStream_t stream);

}  // namespace mtpserve::kernels::cuda
