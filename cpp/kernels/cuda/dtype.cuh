#pragma once
// Element types the CUDA kernels take, named without torch: the wrappers map at::ScalarType onto
// them, and each kernel is instantiated per type through dispatch().
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace mtpserve::kernels::cuda {

enum class DType : int32_t { kFloat32, kBFloat16, kFloat16 };

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }

template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <>
__device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }

// x rounded to T and back: what an op computed in T's precision (as torch does on the CPU) yields.
template <typename T>
__device__ __forceinline__ float round_to(float x) { return to_float(from_float<T>(x)); }

// Calls f(T{}) with T the C++ type of `dtype`.
template <typename F>
cudaError_t dispatch(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat32: return f(float{});
    case DType::kBFloat16: return f(__nv_bfloat16{});
    case DType::kFloat16: return f(__half{});
  }
  return cudaErrorInvalidValue;
}

}  // namespace mtpserve::kernels::cuda
