#include "kernels/cuda/moe_gemv.cuh"

#include "kernels/cuda/warp_dot.cuh"

namespace mtpserve::kernels::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kRowsPerWarp = 4;  // hidden and inter are multiples of 4, so a warp's rows are all in range

__device__ int64_t expert_of(const ExpertGemvLaunch& p, int64_t assignment) {
  const int64_t e = p.experts[assignment];
  return e < 0 ? 0 : (e >= p.num_experts ? p.num_experts - 1 : e);  // memory safety only
}

// Dot products of one x row with kRowsPerWarp rows of `stride` apart.
template <typename T>
__device__ void warp_dots(const T* x, const T* rows, int64_t stride, int64_t n, float (&out)[kRowsPerWarp]) {
  float tile[1][kRowsPerWarp];
  warp_dot_tile<T, 1, kRowsPerWarp>(x, 0, 1, rows, stride, n, tile);
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) out[r] = tile[0][r];
}

// Grid (inter / (warps * rows per warp), assignments): h[a, i] = silu(gate_i . x) * (up_i . x).
template <typename T>
__global__ void expert_up_kernel(ExpertGemvLaunch p) {
  const int64_t a = blockIdx.y, token = a / p.top_k;
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32) * kRowsPerWarp;
  if (first >= p.inter) return;
  const T* x = static_cast<const T*>(p.x) + token * p.hidden;
  const T* w = static_cast<const T*>(p.gate_up) + (expert_of(p, a) * 2 * p.inter + first) * p.hidden;
  float gate[kRowsPerWarp], up[kRowsPerWarp];
  warp_dots(x, w, p.hidden, p.hidden, gate);
  warp_dots(x, w + p.inter * p.hidden, p.hidden, p.hidden, up);
  if (threadIdx.x % 32 != 0) return;
  T* h = static_cast<T*>(p.h) + a * p.inter + first;
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const float g = round_to<T>(gate[r]);
    const float silu = round_to<T>(g / (1.0f + expf(-g)));
    h[r] = from_float<T>(__fmul_rn(silu, round_to<T>(up[r])));
  }
}

// Grid (hidden / rows per warp, tokens): out[t, r] = sum_k weight_k * (down_r . h[t, k]). The block's
// warps split the k experts of the same rows (a token's few experts alone leave most SMs idle), and
// warp 0 sums their outputs in k order.
template <typename T>
__global__ void expert_down_kernel(ExpertGemvLaunch p) {
  __shared__ float outputs[kMaxGemvTopK][kRowsPerWarp];
  const int64_t token = blockIdx.y, first = static_cast<int64_t>(blockIdx.x) * kRowsPerWarp;
  const int warp = threadIdx.x / 32;
  for (int64_t k = warp; k < p.top_k; k += kWarps) {
    const int64_t a = token * p.top_k + k;
    float y[kRowsPerWarp];
    warp_dots(static_cast<const T*>(p.h) + a * p.inter,
              static_cast<const T*>(p.down) + (expert_of(p, a) * p.hidden + first) * p.inter, p.inter, p.inter, y);
    if (threadIdx.x % 32 == 0) {
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) outputs[k][r] = round_to<T>(y[r]);
    }
  }
  __syncthreads();
  if (threadIdx.x >= kRowsPerWarp) return;
  float sum = 0.0f;
  for (int64_t k = 0; k < p.top_k; ++k) sum += p.weights[token * p.top_k + k] * outputs[k][threadIdx.x];
  static_cast<T*>(p.out)[token * p.hidden + first + threadIdx.x] = from_float<T>(sum);
}

unsigned blocks_for_rows(int64_t rows) {
  constexpr int64_t per_block = kWarps * kRowsPerWarp;
  return static_cast<unsigned>((rows + per_block - 1) / per_block);
}

}  // namespace

cudaError_t launch_expert_gemv(const ExpertGemvLaunch& p, cudaStream_t stream) {
  if (p.tokens == 0) return cudaSuccess;
  return dispatch(p.dtype, [&](auto t) {
    using T = decltype(t);
    if (p.hidden % kChunkElems<T> != 0 || p.inter % kChunkElems<T> != 0 || p.top_k > kMaxGemvTopK ||
        p.tokens * p.top_k > kMaxLaunchAssignments) {
      return cudaErrorInvalidValue;
    }
    expert_up_kernel<T><<<dim3(blocks_for_rows(p.inter), static_cast<unsigned>(p.tokens * p.top_k)), kThreads, 0,
                          stream>>>(p);
    if (const cudaError_t status = cudaGetLastError(); status != cudaSuccess) return status;
    const unsigned row_groups = static_cast<unsigned>(p.hidden / kRowsPerWarp);
    expert_down_kernel<T><<<dim3(row_groups, static_cast<unsigned>(p.tokens)), kThreads, 0, stream>>>(p);
    return cudaGetLastError();
  });
}

}  // namespace mtpserve::kernels::cuda
