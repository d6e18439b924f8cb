// The NPU's kernel table. Attention is our Ascend C kernel where this build has it (CANN found at
// build time) unless MTPSERVE_NPU_ATTENTION=fused_infer picks torch_npu's
// npu_fused_infer_attention_score; without it, always the latter.
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "kernels/kernel_ops.h"
#include "kernels/npu/ascendc_attention.h"
#include "kernels/npu/attention_npu.h"
#include "kernels/npu/moe_npu.h"
#include "kernels/npu/norm_rope_npu.h"
#include "kernels/npu/sampling_npu.h"
#include "kernels/sampling_probs.h"

namespace mtpserve::kernels::npu {

namespace {

MlaAttentionFn chosen_attention() {
  const char* env = std::getenv("MTPSERVE_NPU_ATTENTION");
  const std::string choice = env ? env : "";
  if (choice == "fused_infer") return fused_infer_mla_attention;
  if (choice.empty() || choice == "ascendc") {
    if (ascendc_mla_attention != nullptr) return ascendc_mla_attention;
    if (choice.empty()) return fused_infer_mla_attention;
    throw std::invalid_argument("MTPSERVE_NPU_ATTENTION=ascendc: this build has no Ascend C kernels (they are "
                                "built where a CANN toolkit is found)");
  }
  throw std::invalid_argument("MTPSERVE_NPU_ATTENTION=" + choice + ": choose ascendc or fused_infer");
}

}  // namespace

const KernelOps& ops() {
  static const KernelOps table{
      .write_latent_cache = write_latent_cache,
      .mla_attention = chosen_attention(),
      .rms_norm = rms_norm,
      .add_rms_norm = add_rms_norm,
      .rotary = rotary,
      .silu_and_mul = silu_and_mul,
      .route_noaux_tc = route_noaux_tc,
      .moe_experts = moe_experts,
      .sampling_probs = sampling_probs,
      .sample_and_verify = sample_and_verify,
  };
  return table;
}

}  // namespace mtpserve::kernels::npu
