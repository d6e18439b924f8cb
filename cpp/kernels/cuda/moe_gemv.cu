#include "kernels/cuda/moe_gemv.cuh"

namespace mtpserve::kernels::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kRowsPerWarp = 4;

struct alignas(16) Bf16x8 {
  __nv_bfloat162 v[4];
};

// Dot product of two bf16 rows of `n` (a multiple of 8) elements over a warp, fp32, in a fixed order.
__device__ float warp_dot(const __nv_bfloat16* a, const __nv_bfloat16* b, int64_t n) {
  float sum = 0.0f;
  for (int64_t col = threadIdx.x % 32 * 8; col < n; col += 32 * 8) {
    const Bf16x8 x = *reinterpret_cast<const Bf16x8*>(a + col);
    const Bf16x8 y = *reinterpret_cast<const Bf16x8*>(b + col);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 xf = __bfloat1622float2(x.v[j]), yf = __bfloat1622float2(y.v[j]);
      sum = fmaf(xf.x, yf.x, sum);
      sum = fmaf(xf.y, yf.y, sum);
    }
  }
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  return sum;
}

__device__ int64_t expert_of(const ExpertGemvLaunch& p, int64_t assignment) {
  const int64_t e = p.experts[assignment];
  return e < 0 ? 0 : (e >= p.num_experts ? p.num_experts - 1 : e);  // memory safety only
}

// Grid (inter / (warps * rows per warp), assignments): h[a, i] = silu(gate_i . x) * (up_i . x).
__global__ void expert_up_kernel(ExpertGemvLaunch p) {
  const int64_t a = blockIdx.y, token = a / p.top_k;
  const __nv_bfloat16* x = p.x + token * p.hidden;
  const __nv_bfloat16* w = p.gate_up + expert_of(p, a) * 2 * p.inter * p.hidden;
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32) * kRowsPerWarp;
  for (int64_t i = first; i < first + kRowsPerWarp && i < p.inter; ++i) {
    const float gate = round_to<__nv_bfloat16>(warp_dot(x, w + i * p.hidden, p.hidden));
    const float up = round_to<__nv_bfloat16>(warp_dot(x, w + (p.inter + i) * p.hidden, p.hidden));
    const float silu = round_to<__nv_bfloat16>(gate / (1.0f + expf(-gate)));
    if (threadIdx.x % 32 == 0) p.h[a * p.inter + i] = __float2bfloat16_rn(__fmul_rn(silu, up));
  }
}

// Grid (hidden / (warps * rows per warp), tokens): out[t, r] = sum_k weight_k * (down_r . h[t, k]).
__global__ void expert_down_kernel(ExpertGemvLaunch p) {
  const int64_t token = blockIdx.y;
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32) * kRowsPerWarp;
  for (int64_t r = first; r < first + kRowsPerWarp && r < p.hidden; ++r) {
    float sum = 0.0f;
    for (int64_t k = 0; k < p.top_k; ++k) {
      const int64_t a = token * p.top_k + k;
      const __nv_bfloat16* w = p.down + (expert_of(p, a) * p.hidden + r) * p.inter;
      sum += p.weights[a] * round_to<__nv_bfloat16>(warp_dot(p.h + a * p.inter, w, p.inter));
    }
    if (threadIdx.x % 32 == 0) p.out[token * p.hidden + r] = __float2bfloat16_rn(sum);
  }
}

unsigned blocks_for_rows(int64_t rows) {
  constexpr int64_t per_block = kWarps * kRowsPerWarp;
  return static_cast<unsigned>((rows + per_block - 1) / per_block);
}

}  // namespace

cudaError_t launch_expert_gemv(const ExpertGemvLaunch& p, cudaStream_t stream) {
  if (p.tokens == 0) return cudaSuccess;
  if (p.hidden % 8 != 0 || p.inter % 8 != 0 || p.tokens * p.top_k > 65535) return cudaErrorInvalidValue;
  expert_up_kernel<<<dim3(blocks_for_rows(p.inter), static_cast<unsigned>(p.tokens * p.top_k)), kThreads, 0,
                     stream>>>(p);
  if (const cudaError_t status = cudaGetLastError(); status != cudaSuccess) return status;
  expert_down_kernel<<<dim3(blocks_for_rows(p.hidden), static_cast<unsigned>(p.tokens)), kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace mtpserve::kernels::cuda
