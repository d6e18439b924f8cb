#pragma once
// Speculative verification that leaves the output distribution exactly the target's.
// The MTP drafts are argmax tokens (a one-hot draft distribution q), so draft d is accepted
// with probability p(d); on rejection the token is drawn from p with d removed and
// renormalised, i.e. max(p - q, 0) normalised. After k accepted drafts a bonus token is drawn
// from the last row. Greedy rows are one-hot, which turns all of this into exact match.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace mtpserve {

struct Verification {
  std::vector<int64_t> tokens;  // the accepted drafts, then one corrected or bonus token
  int64_t accepted = 0;
};

// probs: [drafts + 1, vocab], the target distributions at the rows fed [last, d1..dk].
// Uniforms come from (seed, first_draw + j) so a seeded request is reproducible.
Verification verify_drafts(const at::Tensor& probs, const std::vector<int64_t>& drafts, bool greedy, uint64_t seed,
                           uint64_t first_draw);

}  // namespace mtpserve
