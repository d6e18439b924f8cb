#include "kernels/cuda/device_info.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <atomic>

namespace mtpserve::kernels::cuda {

namespace {

// A device attribute, asked once per device (-1 where the runtime cannot say).
template <cudaDeviceAttr Attribute>
int device_attribute(int device) {
  static std::array<std::atomic<int>, 64> known{};  // value + 1; 0 = not asked yet
  const bool cached = device >= 0 && device < static_cast<int>(known.size());
  const int seen = cached ? known[device].load(std::memory_order_relaxed) : 0;
  if (seen != 0) return seen - 1;
  int value = -1;
  if (cudaDeviceGetAttribute(&value, Attribute, device) != cudaSuccess) value = -1;
  if (cached) known[device].store(value + 1, std::memory_order_relaxed);
  return value;
}

}  // namespace

int multiprocessor_count(int device) {
  return std::max(1, device_attribute<cudaDevAttrMultiProcessorCount>(device));
}

int current_multiprocessor_count() {
  int device = 0;
  return cudaGetDevice(&device) == cudaSuccess ? multiprocessor_count(device) : 1;
}

int compute_capability_major(int device) { return device_attribute<cudaDevAttrComputeCapabilityMajor>(device); }

bool sm90a_device() {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  return device_attribute<cudaDevAttrComputeCapabilityMajor>(device) == 9 &&
         device_attribute<cudaDevAttrComputeCapabilityMinor>(device) == 0;
}

}  // namespace mtpserve::kernels::cuda
