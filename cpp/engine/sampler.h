#pragma once
// Turns logits rows into tokens: penalties, temperature, top-k, top-p, min-p, greedy or seeded
// sampling, and logprobs of the model's raw distribution.
#include <ATen/core/Tensor.h>

#include <span>
#include <utility>
#include <vector>

#include "core/sampling_params.h"

namespace mtpserve {

struct SamplingRow {
  const SamplingParams* params;
  std::span<const int64_t> output_tokens;  // what penalties count
  uint64_t seed;
  uint64_t draw;  // index of the output token being drawn
};

struct TokenLogprobs {
  int64_t token;
  float logprob;
  int64_t rank;                              // 1 = most likely
  std::vector<std::pair<int64_t, float>> top;  // the n most likely (token, logprob)
};

struct SampleResult {
  std::vector<int64_t> tokens;
  std::vector<TokenLogprobs> logprobs;  // per row; empty entries where none were asked
};

class Sampler {
 public:
  SampleResult sample(const at::Tensor& logits, const std::vector<SamplingRow>& rows) const;

  // The distribution sampled rows draw from, in vocabulary order [rows, vocab] float32; a greedy
  // row is one-hot on its argmax. Speculative verification accepts drafts against exactly this.
  at::Tensor probabilities(const at::Tensor& logits, const std::vector<SamplingRow>& rows) const;

  // The chosen token's raw logprob and rank plus the top_n most likely, from one logits row.
  static TokenLogprobs token_logprobs(const at::Tensor& logits_row, int64_t token, int64_t top_n);
  // Inverse-CDF draw from one probability row with the uniform u.
  static int64_t draw(const at::Tensor& probs_row, double u);
};

}  // namespace mtpserve
