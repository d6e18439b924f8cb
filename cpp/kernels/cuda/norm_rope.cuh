#pragma once
// RMSNorm (optionally fused with the residual add), interleaved rotary embedding and SiLU-and-mul:
// one launch each for the whole batch. Arithmetic in fp32, rounded to the element type after every
// op the CPU kernels compute in that type, so the GPU and CPU results agree to the last rounding.
#include "kernels/cuda/dtype.cuh"

namespace mtpserve::kernels::cuda {

struct RmsNormLaunch {
  const void* x;       // [rows, dim], rows x_stride elements apart, last dim contiguous
  const void* delta;   // like x (delta_stride), or null: then sum = x + delta is normalised and written
  const void* weight;  // [dim]
  void* sum;           // [rows, dim] contiguous, when delta is given
  void* out;           // [rows, dim] contiguous; x's dtype, or fp32 when the weight's dtype differs
  int64_t rows, dim, x_stride, delta_stride;
  float eps;
  DType dtype, weight_dtype;
};
cudaError_t launch_rms_norm(const RmsNormLaunch& p, cudaStream_t stream);

struct RotaryLaunch {
  const void* x;             // [tokens, heads, dim], strides (token_stride, head_stride, 1)
  void* out;                 // [tokens, heads, dim] contiguous
  const int64_t* positions;  // [tokens]
  const float* cos;          // [max_positions, dim / 2]
  const float* sin;
  int64_t tokens, heads, dim, token_stride, head_stride;
  DType dtype;
};
cudaError_t launch_rotary(const RotaryLaunch& p, cudaStream_t stream);

// RMSNorm of the latent part and rotary of the rope part of each token's kv row, stored at its cache
// slot: rms_norm_kernel's and rotary_kernel's arithmetic in one launch (kernels/attention.h, WriteLatentKvFn).
struct LatentKvLaunch {
  const void* kv;               // [tokens, lora + rope], rows kv_stride elements apart, last dim contiguous
  const void* weight;           // [lora], kv's dtype
  void* cache;                  // [cache_rows, lora + rope], kv's dtype
  const int64_t* slot_mapping;  // [tokens]: negative (padding) or >= cache_rows: skipped
  const int64_t* positions;     // [tokens]
  const float* cos;             // [max_positions, rope / 2]
  const float* sin;
  int64_t tokens, lora, rope, kv_stride, cache_rows;
  float eps;
  DType dtype;
};
cudaError_t launch_write_latent_kv(const LatentKvLaunch& p, cudaStream_t stream);

struct SiluAndMulLaunch {
  const void* gate_up;  // [rows, 2 * inter], rows in_stride elements apart
  void* out;            // [rows, inter] contiguous
  int64_t rows, inter, in_stride;
  DType dtype;
};
cudaError_t launch_silu_and_mul(const SiluAndMulLaunch& p, cudaStream_t stream);

}  // namespace mtpserve::kernels::cuda
