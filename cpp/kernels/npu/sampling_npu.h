#pragma once
#include "kernels/sampling.h"

namespace mtpserve::kernels::npu {

SampledTokens sample_and_verify(const at::Tensor& probs, const DraftTensors& drafts, int64_t max_drafts);

}  // namespace mtpserve::kernels::npu
