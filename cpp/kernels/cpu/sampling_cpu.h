#pragma once
#include "kernels/sampling.h"

namespace mtpserve::kernels::cpu {

// SampleAndVerifyFn on the CPU; also the reference every device's kernel is tested against.
SampledTokens sample_and_verify(const at::Tensor& probs, const DraftTensors& drafts, int64_t max_drafts);

}  // namespace mtpserve::kernels::cpu
