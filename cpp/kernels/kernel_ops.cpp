#include "kernels/kernel_ops.h"

#include <stdexcept>
#include <string>

namespace mtpserve::kernels {

const KernelOps& ops_for(const at::Device& device) {
  switch (device.type()) {
    case at::DeviceType::CPU:
      return cpu::ops();
#ifdef MTPSERVE_WITH_CUDA
    case at::DeviceType::CUDA:
      return cuda::ops();
#endif
    default:
      throw std::invalid_argument("no mtpserve kernels for device " + device.str() +
                                  " in this build (CUDA kernels are built when torch has CUDA and nvcc is found)");
  }
}

}  // namespace mtpserve::kernels
