#pragma once
// The device seam: one table of kernel entry points per device. Layers look their table up once,
// when they are built, from the device their weights live on; nothing on the step path asks which
// device it runs on again.
// Two tables per device may exist: the default (fastest) kernels, and the batch-invariant ones
// (--batch_invariant), under which every op gives each token row bit-identical results whatever
// the other rows of the step: how many there are, how many query rows its sequence has (decode vs
// MTP verify vs prefill chunk), its position and the padding. The model is built with one of them.
#include <c10/core/Device.h>

#include "kernels/attention.h"
#include "kernels/linear.h"
#include "kernels/moe.h"
#include "kernels/norm_rope.h"
#include "kernels/piecewise_graph.h"
#include "kernels/row_buckets.h"
#include "kernels/sampling.h"
#include "kernels/step_graph.h"
#include "kernels/device_timer.h"

namespace mtpserve::kernels {

struct KernelOps {
  WriteLatentCacheFn write_latent_cache;
  MlaAttentionFn mla_attention;
  RmsNormFn rms_norm;
  AddRmsNormFn add_rms_norm;
  RotaryFn rotary;
  SiluAndMulFn silu_and_mul;
  RouteFn route_noaux_tc;
  MoeExpertsFn moe_experts;
  SamplingProbsFn sampling_probs;
  SampleAndVerifyFn sample_and_verify;
  // Unset where the device has no fused op: write_latent_kv() (kernels/latent_kv.h) composes it.
  WriteLatentKvFn write_latent_kv = nullptr;
  // Unset (nullptr) in a device's table: ops_for() gives the generic torch versions.
  LinearFn linear = nullptr;
  HeadMatmulFn head_matmul = nullptr;
  // Unset where the device has no graphs: every step runs eagerly there.
  CaptureGraphFn capture_graph = nullptr;
  CapturePiecewiseFn capture_piecewise = nullptr;
  // The row count (and sampled-row count) a forward run eagerly is padded to (kernels/row_buckets.h). Unset: none.
  EagerRowsFn eager_rows = nullptr;
  MakeDeviceTimerFn make_device_timer = nullptr;  // unset: ops_for() gives the host clock
};

// The kernels for `device` (its batch-invariant table with `batch_invariant`); throws
// std::invalid_argument naming the device when this build has none.
const KernelOps& ops_for(const at::Device& device, bool batch_invariant = false);

// Test-only: CPU tensors get the NPU table, whose ops then reach CPU stand-ins registered under
// torch_npu's schemas (tests/npu_stand_ins.py). Layers look their table up when they are built,
// so this holds for engines built while it is on.
void use_npu_kernels_on_cpu(bool on);

namespace cpu {
const KernelOps& ops();
// Row-invariant kernels (kernels/cpu/batch_invariant_cpu.h).
const KernelOps& batch_invariant_ops();
}  // namespace cpu

// torch_npu's ops through the dispatcher; in every build (nothing of torch_npu is linked).
namespace npu {
const KernelOps& ops();
}  // namespace npu

#ifdef MTPSERVE_WITH_CUDA
namespace cuda {
const KernelOps& ops();
// Row-invariant kernels (kernels/cuda/batch_invariant_cuda.h).
const KernelOps& batch_invariant_ops();
}  // namespace cuda
#endif

}  // namespace mtpserve::kernels
