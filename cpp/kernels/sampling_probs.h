#pragma once
#include "kernels/sampling.h"

namespace mtpserve::kernels {

// SamplingProbsFn with batched torch ops (one op per stage for the whole [rows, vocab] batch, no
// per-row loop), so every device registers this same function.
at::Tensor sampling_probs(const at::Tensor& logits, const SamplingTensors& s);

}  // namespace mtpserve::kernels
