#pragma once
// What the kernels' host side asks of a device: its multiprocessor count and compute capability, each asked
// once per device, and a kernel's shared-memory limit, raised once (launches captured into a CUDA graph then
// make no attribute calls).
#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <mutex>

namespace mtpserve::kernels::cuda {

// The multiprocessor count of `device` (at least 1).
int multiprocessor_count(int device);

// The multiprocessor count of the current device, or 1 when there is none to ask.
int current_multiprocessor_count();

// The compute capability's major number of `device`, or -1 when it cannot be read.
int compute_capability_major(int device);

// Whether the current device runs the sm_90a code (wgmma, bulk tensor copies): compute capability 9.0.
bool sm90a_device();

// Raises Kernel's dynamic shared memory limit to at least `bytes` on the current device, calling the
// runtime only when the limit must grow.
template <auto Kernel>
cudaError_t allow_smem(size_t bytes) {
  static std::array<size_t, 64> allowed{};
  static std::mutex mutex;
  int device = 0;
  cudaError_t status = cudaGetDevice(&device);
  if (status != cudaSuccess) return status;
  std::lock_guard<std::mutex> lock(mutex);
  const bool cached = device < static_cast<int>(allowed.size());
  if (cached && allowed[device] >= bytes) return cudaSuccess;
  status = cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
  if (status == cudaSuccess && cached) allowed[device] = bytes;
  return status;
}

}  // namespace mtpserve::kernels::cuda
