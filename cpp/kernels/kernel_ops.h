#pragma once
// The device seam: one table of kernel entry points per device. Layers look their table up once,
// when they are built, from the device their weights live on; nothing on the step path asks which
// device it runs on again.
#include <c10/core/Device.h>

#include "kernels/attention.h"
#include "kernels/moe.h"
#include "kernels/norm_rope.h"
#include "kernels/sampling.h"

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
};

// The kernels for `device`; throws std::invalid_argument naming the device when this build has none.
const KernelOps& ops_for(const at::Device& device);

namespace cpu {
const KernelOps& ops();
}  // namespace cpu

#ifdef MTPSERVE_WITH_CUDA
namespace cuda {
const KernelOps& ops();
}  // namespace cuda
#endif

}  // namespace mtpserve::kernels
