#pragma once
// Log-probabilities of given tokens under logits rows (the prompt's, for echo / prompt logprobs):
// computed on the rows a prefill chunk already produced, so no extra forward is needed.
#include <ATen/core/Tensor.h>

#include <vector>

#include "engine/sampler.h"

namespace mtpserve {

// One TokenLogprobs per row: tokens[r]'s logprob and rank under logits[r], and its top_n[r] most
// likely tokens.
std::vector<TokenLogprobs> token_logprobs(const at::Tensor& logits, const std::vector<int64_t>& tokens,
                                          const std::vector<int64_t>& top_n);

}  // namespace mtpserve
