#include <algorithm>
#include <type_traits>

#include "kernels/cuda/norm_rope.cuh"

namespace mtpserve::kernels::cuda {

namespace {

// N elements moved as one (or, past 16 bytes, two) 16-byte access.
template <typename T, int N>
struct alignas(sizeof(T) * N >= 16 ? 16 : sizeof(T) * N) Pack {
  T v[N];
};

// Elements per 16-byte access of T.
template <typename T>
constexpr int kVec = 16 / static_cast<int>(sizeof(T));

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

unsigned blocks_for(int64_t n, int threads) { return static_cast<unsigned>((n + threads - 1) / threads); }

// Threads of a row normalisation: they depend on the row width only, so a row's reduction order never
// depends on the batch (and the fused latent write sums exactly as rms_norm does).
int norm_threads(int64_t dim, int vec) {
  const int64_t accesses = dim / vec;
  return static_cast<int>(std::min<int64_t>(1024, std::max<int64_t>(32, (accesses + 31) / 32 * 32)));
}

// Sum over the block in a fixed tree (lanes, then warps): the same bits whatever the launch's row count.
__device__ float block_sum(float v) {
  __shared__ float warp_sums[32];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  v = lane < warps ? warp_sums[lane] : 0.0f;
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// The VEC values of a row at column `col` that are normalised: x, or x + delta rounded to T (as the
// separate torch add of the CPU kernel leaves it), which is also written to `sum` when given.
template <typename T, int VEC>
__device__ void load_row_values(const T* x, const T* delta, T* sum, int64_t col, float (&v)[VEC]) {
  const auto xs = *reinterpret_cast<const Pack<T, VEC>*>(x + col);
  if (delta == nullptr) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) v[j] = to_float(xs.v[j]);
    return;
  }
  const auto ds = *reinterpret_cast<const Pack<T, VEC>*>(delta + col);
  Pack<T, VEC> rounded;
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    rounded.v[j] = from_float<T>(to_float(xs.v[j]) + to_float(ds.v[j]));
    v[j] = to_float(rounded.v[j]);
  }
  if (sum != nullptr) *reinterpret_cast<Pack<T, VEC>*>(sum + col) = rounded;
}

// 1 / rms of a row (x, or x + delta written to `sum`), each thread summing VEC consecutive columns at a
// time, then the block's fixed tree. Every thread of the block must call it (it synchronises).
template <typename T, int VEC>
__device__ float row_inverse_rms(const T* x, const T* delta, T* sum, int64_t dim, float eps) {
  float squares = 0.0f;
  for (int64_t col = threadIdx.x * VEC; col < dim; col += blockDim.x * VEC) {
    float v[VEC];
    load_row_values<T, VEC>(x, delta, sum, col, v);
#pragma unroll
    for (int j = 0; j < VEC; ++j) squares += v[j] * v[j];
  }
  const float total = block_sum(squares);
  return 1.0f / sqrtf(total / static_cast<float>(dim) + eps);
}

// The CPU kernel's order of roundings: normalise in fp32, round to T, multiply by the weight in the
// promoted type O.
template <typename T, typename W, typename O, int VEC>
__device__ void store_normalised(const T* x, const T* delta, const W* weight, O* out, int64_t dim, float inv) {
  for (int64_t col = threadIdx.x * VEC; col < dim; col += blockDim.x * VEC) {
    float v[VEC];
    load_row_values<T, VEC>(x, delta, nullptr, col, v);
    const auto ws = *reinterpret_cast<const Pack<W, VEC>*>(weight + col);
    Pack<O, VEC> result;
#pragma unroll
    for (int j = 0; j < VEC; ++j) result.v[j] = from_float<O>(to_float(ws.v[j]) * round_to<T>(__fmul_rn(v[j], inv)));
    *reinterpret_cast<Pack<O, VEC>*>(out + col) = result;
  }
}

// One block per row.
template <typename T, typename W, int VEC>
__global__ void rms_norm_kernel(RmsNormLaunch p) {
  using O = std::conditional_t<std::is_same_v<T, W>, T, float>;
  const int64_t row = blockIdx.x;
  const T* x = static_cast<const T*>(p.x) + row * p.x_stride;
  const T* delta = p.delta ? static_cast<const T*>(p.delta) + row * p.delta_stride : nullptr;
  T* sum = p.delta ? static_cast<T*>(p.sum) + row * p.dim : nullptr;
  const float inv = row_inverse_rms<T, VEC>(x, delta, sum, p.dim, p.eps);
  store_normalised<T, W, O, VEC>(x, delta, static_cast<const W*>(p.weight), static_cast<O*>(p.out) + row * p.dim,
                                 p.dim, inv);
}

template <typename T, typename W>
cudaError_t launch_rms_norm_typed(const RmsNormLaunch& p, cudaStream_t stream) {
  constexpr int vec = kVec<T>;
  const bool vectorised = p.dim % vec == 0 && p.x_stride % vec == 0 && aligned16(p.x) && aligned16(p.weight) &&
                          aligned16(p.out) &&
                          (p.delta == nullptr || (p.delta_stride % vec == 0 && aligned16(p.delta) && aligned16(p.sum)));
  const int threads = norm_threads(p.dim, vectorised ? vec : 1);
  const auto rows = static_cast<unsigned>(p.rows);
  if (vectorised) {
    rms_norm_kernel<T, W, vec><<<rows, threads, 0, stream>>>(p);
  } else {
    rms_norm_kernel<T, W, 1><<<rows, threads, 0, stream>>>(p);
  }
  return cudaGetLastError();
}

// Pair (x[2i], x[2i+1]) rotated by the angle of (pos, i) into out[i] and out[half + i]; each product
// and sum rounded to T as the CPU kernel computes them in T (no fused multiply-add), with cos/sin first
// rounded to T as it does.
template <typename T>
__device__ __forceinline__ void rotate_pair(const T* x, T* out, int64_t pos, int64_t i, int64_t half, const float* cos,
                                            const float* sin) {
  const float c = round_to<T>(cos[pos * half + i]), s = round_to<T>(sin[pos * half + i]);
  const float even = to_float(x[2 * i]), odd = to_float(x[2 * i + 1]);
  out[i] = from_float<T>(__fsub_rn(round_to<T>(__fmul_rn(even, c)), round_to<T>(__fmul_rn(odd, s))));
  out[half + i] = from_float<T>(__fadd_rn(round_to<T>(__fmul_rn(odd, c)), round_to<T>(__fmul_rn(even, s))));
}

// One thread per rotated pair.
template <typename T>
__global__ void rotary_kernel(RotaryLaunch p) {
  const int64_t half = p.dim / 2;
  const int64_t index = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (index >= p.tokens * p.heads * half) return;
  const int64_t i = index % half, vec = index / half, token = vec / p.heads, head = vec % p.heads;
  const T* x = static_cast<const T*>(p.x) + token * p.token_stride + head * p.head_stride;
  T* out = static_cast<T*>(p.out) + vec * p.dim;
  rotate_pair(x, out, p.positions[token], i, half, p.cos, p.sin);
}

// One block per token: the latent part normalised as rms_norm_kernel does it (same threads, same tree),
// the rope pairs rotated as rotary_kernel does, both written straight into the token's cache row.
template <typename T, int VEC>
__global__ void latent_kv_kernel(LatentKvLaunch p) {
  const int64_t token = blockIdx.x;
  const T* kv = static_cast<const T*>(p.kv) + token * p.kv_stride;
  const float inv = row_inverse_rms<T, VEC>(kv, nullptr, nullptr, p.lora, p.eps);
  const int64_t slot = p.slot_mapping[token];
  if (slot < 0 || slot >= p.cache_rows) return;
  T* row = static_cast<T*>(p.cache) + slot * (p.lora + p.rope);
  store_normalised<T, T, T, VEC>(kv, nullptr, static_cast<const T*>(p.weight), row, p.lora, inv);
  const int64_t half = p.rope / 2, pos = p.positions[token];
  for (int64_t i = threadIdx.x; i < half; i += blockDim.x) rotate_pair(kv + p.lora, row + p.lora, pos, i, half, p.cos, p.sin);
}

// One thread per VEC consecutive outputs: silu(gate) rounded to T, times up, rounded to T (at::silu
// then a multiply in T on the CPU).
template <typename T, int VEC>
__global__ void silu_and_mul_kernel(SiluAndMulLaunch p) {
  const int64_t index = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) * VEC;
  if (index >= p.rows * p.inter) return;
  const int64_t row = index / p.inter, col = index % p.inter;
  const T* gate = static_cast<const T*>(p.gate_up) + row * p.in_stride + col;
  const auto g = *reinterpret_cast<const Pack<T, VEC>*>(gate);
  const auto u = *reinterpret_cast<const Pack<T, VEC>*>(gate + p.inter);
  Pack<T, VEC> result;
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    const float gf = to_float(g.v[j]);
    const float silu = round_to<T>(gf / (1.0f + expf(-gf)));
    result.v[j] = from_float<T>(__fmul_rn(silu, to_float(u.v[j])));
  }
  *reinterpret_cast<Pack<T, VEC>*>(static_cast<T*>(p.out) + index) = result;
}

}  // namespace

cudaError_t launch_rms_norm(const RmsNormLaunch& p, cudaStream_t stream) {
  if (p.rows == 0 || p.dim == 0) return cudaSuccess;
  return dispatch(p.dtype, [&](auto t) {
    return dispatch(p.weight_dtype, [&](auto w) {
      return launch_rms_norm_typed<decltype(t), decltype(w)>(p, stream);
    });
  });
}

cudaError_t launch_rotary(const RotaryLaunch& p, cudaStream_t stream) {
  const int64_t pairs = p.tokens * p.heads * (p.dim / 2);
  if (pairs == 0) return cudaSuccess;
  return dispatch(p.dtype, [&](auto t) {
    rotary_kernel<decltype(t)><<<blocks_for(pairs, 256), 256, 0, stream>>>(p);
    return cudaGetLastError();
  });
}

cudaError_t launch_write_latent_kv(const LatentKvLaunch& p, cudaStream_t stream) {
  if (p.tokens == 0) return cudaSuccess;
  return dispatch(p.dtype, [&](auto t) {
    using T = decltype(t);
    constexpr int vec = kVec<T>;
    const bool vectorised = p.lora % vec == 0 && p.kv_stride % vec == 0 && (p.lora + p.rope) % vec == 0 &&
                            aligned16(p.kv) && aligned16(p.weight) && aligned16(p.cache);
    const int threads = norm_threads(p.lora, vectorised ? vec : 1);
    const auto tokens = static_cast<unsigned>(p.tokens);
    if (vectorised) {
      latent_kv_kernel<T, vec><<<tokens, threads, 0, stream>>>(p);
    } else {
      latent_kv_kernel<T, 1><<<tokens, threads, 0, stream>>>(p);
    }
    return cudaGetLastError();
  });
}

cudaError_t launch_silu_and_mul(const SiluAndMulLaunch& p, cudaStream_t stream) {
  const int64_t n = p.rows * p.inter;
  if (n == 0) return cudaSuccess;
  return dispatch(p.dtype, [&](auto t) {
    using T = decltype(t);
    constexpr int vec = kVec<T>;
    if (p.inter % vec == 0 && p.in_stride % vec == 0 && aligned16(p.gate_up) && aligned16(p.out)) {
      silu_and_mul_kernel<T, vec><<<blocks_for(n / vec, 256), 256, 0, stream>>>(p);
    } else {
      silu_and_mul_kernel<T, 1><<<blocks_for(n, 256), 256, 0, stream>>>(p);
    }
    return cudaGetLastError();
  });
}

}  // namespace mtpserve::kernels::cuda
