#pragma once
// What every CUDA wrapper needs between at::Tensor and a launch struct: the element type, the
// current stream of the tensor's device, and launch errors turned into exceptions.
#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAStream.h>

#include <stdexcept>
#include <string>

#include "kernels/cuda/dtype.cuh"

namespace mtpserve::kernels::cuda {

inline DType dtype_of(const at::Tensor& t, const char* op) {
  switch (t.scalar_type()) {
    case at::kFloat: return DType::kFloat32;
    case at::kBFloat16: return DType::kBFloat16;
    case at::kHalf: return DType::kFloat16;
    default:
      throw std::invalid_argument(std::string(op) + ": unsupported dtype " + std::string(c10::toString(t.scalar_type())) +
                                  " (float32, bfloat16 or float16)");
  }
}

inline cudaStream_t stream_of(const at::Tensor& t) {
  return c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
}

inline void check_launch(cudaError_t status, const char* op) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(op) + ": " + cudaGetErrorString(status));
}

inline void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument(message);
}

}  // namespace mtpserve::kernels::cuda
