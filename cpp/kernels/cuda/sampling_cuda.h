#pragma once
#include "kernels/sampling.h"

namespace mtpserve::kernels::cuda {

// SampleAndVerifyFn on a CUDA device: one launch for the whole batch. (sampling_probs is the
// device-generic kernels/sampling_probs.h.)
SampledTokens sample_and_verify(const at::Tensor& probs, const DraftTensors& drafts, int64_t max_drafts);

}  // namespace mtpserve::kernels::cuda
