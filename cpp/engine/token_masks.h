#pragma once
// Applies the grammars of a step's constrained requests (core/token_constraint.h) to their logits rows,
// before any sampling or verification, so greedy, sampled and verify rows all draw from the masked
// distribution.
#include <ATen/core/Tensor.h>

#include <vector>

#include "engine/sampler.h"

namespace mtpserve {

// The logits with every token a request's grammar forbids at -inf in that request's rows; `logits`
// itself when no request has a grammar. Throws std::logic_error when one has and `masker` is null.
at::Tensor mask_logits(const at::Tensor& logits, const std::vector<SampleRequest>& requests, TokenMasker* masker);

}  // namespace mtpserve
