#pragma once
#include "kernels/attention.h"

namespace mtpserve::kernels::npu {

// Our Ascend C kernel (ascendc_kernels/fused_mtp_mla_attention) launched on the current NPU stream;
// nullptr in a build without it (it needs CANN and torch_npu at build time: cann/).
extern const MlaAttentionFn ascendc_mla_attention;

}  // namespace mtpserve::kernels::npu
