#include "kernels/kernel_ops.h"

#include <atomic>
#include <stdexcept>
#include <string>

namespace mtpserve::kernels {

namespace {

// A device's table with the entries it leaves unset filled by the generic torch versions.
KernelOps with_generic(KernelOps table) {
  if (table.linear == nullptr) table.linear = torch_linear;
  if (table.head_matmul == nullptr) table.head_matmul = torch_head_matmul;
  if (table.make_device_timer == nullptr) {
    table.make_device_timer = []() -> std::unique_ptr<DeviceTimer> { return std::make_unique<HostTimer>(); };
  }
  return table;
}

std::atomic<bool> npu_kernels_on_cpu{false};

const KernelOps& npu_ops(bool batch_invariant) {
  if (batch_invariant) {
    throw std::invalid_argument("--batch_invariant: the NPU kernels have no batch-invariant table yet "
                                "(the CPU and CUDA have one)");
  }
  static const KernelOps fast = with_generic(npu::ops());
  return fast;
}

}  // namespace

void use_npu_kernels_on_cpu(bool on) { npu_kernels_on_cpu = on; }

const KernelOps& ops_for(const at::Device& device, bool batch_invariant) {
  switch (device.type()) {
    // torch_npu registers the NPU as PrivateUse1 (renamed "npu").
    case at::DeviceType::PrivateUse1:
      return npu_ops(batch_invariant);
    case at::DeviceType::CPU: {
      if (npu_kernels_on_cpu) return npu_ops(batch_invariant);
      static const KernelOps fast = with_generic(cpu::ops());
      static const KernelOps invariant = with_generic(cpu::batch_invariant_ops());
      return batch_invariant ? invariant : fast;
    }
#ifdef MTPSERVE_WITH_CUDA
    case at::DeviceType::CUDA: {
      static const KernelOps fast = with_generic(cuda::ops());
      static const KernelOps invariant = with_generic(cuda::batch_invariant_ops());
      return batch_invariant ? invariant : fast;
    }
#endif
    default:
      throw std::invalid_argument("no mtpserve kernels for device " + device.str() +
                                  " in this build (CUDA kernels are built when torch has CUDA and nvcc is found)");
  }
}

}  // namespace mtpserve::kernels
