#include "kernels/cuda/moe_gemv.cuh"

namespace mtpserve::kernels::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kRowsPerWarp = 4;  // hidden and inter are multiples of 8, so a warp's rows are all in range

struct alignas(16) Bf16x8 {
  __nv_bfloat162 v[4];
};

// Dot products of x with R bf16 rows of `n` (a multiple of 8) elements each, `stride` apart, over
// a warp, in fp32 and a fixed order: each x chunk is loaded once for all R rows, and the R loads
// are independent, so a warp keeps several in flight.
template <int R>
__device__ void warp_dots(const __nv_bfloat16* x, const __nv_bfloat16* rows, int64_t stride, int64_t n,
                          float (&out)[R]) {
#pragma unroll
  for (int r = 0; r < R; ++r) out[r] = 0.0f;
  for (int64_t col = threadIdx.x % 32 * 8; col < n; col += 32 * 8) {
    const Bf16x8 xs = *reinterpret_cast<const Bf16x8*>(x + col);
    Bf16x8 ws[R];
#pragma unroll
    for (int r = 0; r < R; ++r) ws[r] = *reinterpret_cast<const Bf16x8*>(rows + r * stride + col);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 xf = __bfloat1622float2(xs.v[j]);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float2 wf = __bfloat1622float2(ws[r].v[j]);
        out[r] = fmaf(xf.y, wf.y, fmaf(xf.x, wf.x, out[r]));
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    for (int offset = 16; offset > 0; offset /= 2) out[r] += __shfl_xor_sync(0xffffffffu, out[r], offset);
  }
}

__device__ int64_t expert_of(const ExpertGemvLaunch& p, int64_t assignment) {
  const int64_t e = p.experts[assignment];
  return e < 0 ? 0 : (e >= p.num_experts ? p.num_experts - 1 : e);  // memory safety only
}

// Grid (inter / (warps * rows per warp), assignments): h[a, i] = silu(gate_i . x) * (up_i . x).
__global__ void expert_up_kernel(ExpertGemvLaunch p) {
  const int64_t a = blockIdx.y, token = a / p.top_k;
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32) * kRowsPerWarp;
  if (first >= p.inter) return;
  const __nv_bfloat16* x = p.x + token * p.hidden;
  const __nv_bfloat16* w = p.gate_up + (expert_of(p, a) * 2 * p.inter + first) * p.hidden;
  float gate[kRowsPerWarp], up[kRowsPerWarp];
  warp_dots(x, w, p.hidden, p.hidden, gate);
  warp_dots(x, w + p.inter * p.hidden, p.hidden, p.hidden, up);
  if (threadIdx.x % 32 != 0) return;
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const float g = round_to<__nv_bfloat16>(gate[r]);
    const float silu = round_to<__nv_bfloat16>(g / (1.0f + expf(-g)));
    p.h[a * p.inter + first + r] = __float2bfloat16_rn(__fmul_rn(silu, round_to<__nv_bfloat16>(up[r])));
  }
}

// Grid (hidden / rows per warp, tokens): out[t, r] = sum_k weight_k * (down_r . h[t, k]). The block's
// warps split the k experts of the same rows (a token's few experts alone leave most SMs idle), and
// warp 0 sums their outputs in k order.
__global__ void expert_down_kernel(ExpertGemvLaunch p) {
  __shared__ float outputs[kMaxGemvTopK][kRowsPerWarp];
  const int64_t token = blockIdx.y, first = static_cast<int64_t>(blockIdx.x) * kRowsPerWarp;
  const int warp = threadIdx.x / 32;
  for (int64_t k = warp; k < p.top_k; k += kWarps) {
    const int64_t a = token * p.top_k + k;
    float y[kRowsPerWarp];
    warp_dots(p.h + a * p.inter, p.down + (expert_of(p, a) * p.hidden + first) * p.inter, p.inter, p.inter, y);
    if (threadIdx.x % 32 == 0) {
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) outputs[k][r] = round_to<__nv_bfloat16>(y[r]);
    }
  }
  __syncthreads();
  if (threadIdx.x >= kRowsPerWarp) return;
  float sum = 0.0f;
  for (int64_t k = 0; k < p.top_k; ++k) sum += p.weights[token * p.top_k + k] * outputs[k][threadIdx.x];
  p.out[token * p.hidden + first + threadIdx.x] = __float2bfloat16_rn(sum);
}

unsigned blocks_for_rows(int64_t rows) {
  constexpr int64_t per_block = kWarps * kRowsPerWarp;
  return static_cast<unsigned>((rows + per_block - 1) / per_block);
}

}  // namespace

cudaError_t launch_expert_gemv(const ExpertGemvLaunch& p, cudaStream_t stream) {
  if (p.tokens == 0) return cudaSuccess;
  if (p.hidden % 8 != 0 || p.inter % 8 != 0 || p.top_k > kMaxGemvTopK || p.tokens * p.top_k > 65535) {
    return cudaErrorInvalidValue;
  }
  expert_up_kernel<<<dim3(blocks_for_rows(p.inter), static_cast<unsigned>(p.tokens * p.top_k)), kThreads, 0,
                     stream>>>(p);
  if (const cudaError_t status = cudaGetLastError(); status != cudaSuccess) return status;
  const unsigned row_groups = static_cast<unsigned>(p.hidden / kRowsPerWarp);
  expert_down_kernel<<<dim3(row_groups, static_cast<unsigned>(p.tokens)), kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace mtpserve::kernels::cuda
