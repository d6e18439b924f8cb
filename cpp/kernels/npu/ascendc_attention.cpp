#include "kernels/npu/ascendc_attention.h"

namespace mtpserve::kernels::npu {

// A build with CANN defines it in cann/ascendc_attention_cann.cpp.
#ifndef MTPSERVE_WITH_ASCENDC
extern const MlaAttentionFn ascendc_mla_attention = nullptr;
#endif

}  // namespace mtpserve::kernels::npu
