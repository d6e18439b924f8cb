// Per-request sampling settings, named and defaulted like vLLM's SamplingParams.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "core/token_constraint.h"

namespace mtpserve {

struct SamplingParams {
  double temperature = 1.0;
  double top_p = 1.0;
  int64_t top_k = 0;  // 0 or -1: off
  double min_p = 0.0;
  std::optional<uint64_t> seed;  // same seed -> same output, whatever the batch
  double presence_penalty = 0.0;
  double frequency_penalty = 0.0;
  int64_t max_tokens = 16;
  std::vector<int64_t> stop_token_ids;
  bool ignore_eos = false;
  int64_t logprobs = -1;  // -1: none; n >= 0: the chosen token's logprob plus the top n
  double repetition_penalty = 1.0;                     // vLLM's: seen logits / (> 0) or * (<= 0) it; 1: off
  std::vector<std::pair<int64_t, float>> logit_bias;  // (token, added to its logit)
  int64_t min_tokens = 0;  // EOS and stop_token_ids are masked until this many output tokens
  int64_t prompt_logprobs = -1;  // -1: none; n >= 0: each prompt token's logprob plus the top n
  std::shared_ptr<TokenConstraint> constraint;  // a grammar the output must follow; null: none

  // Sampling collapses to argmax: speculative verification can then use exact match.
  bool greedy() const { return temperature == 0.0 || top_k == 1; }
  // The token is the argmax of the logits: greedy, nothing added to or scaled in them first (a
  // grammar's mask, applied to the logits before any sampling, keeps this true).
  bool argmax_only() const {
    return greedy() && presence_penalty == 0.0 && frequency_penalty == 0.0 && repetition_penalty == 1.0 &&
           logit_bias.empty() && min_tokens == 0;
  }

  // Throws std::invalid_argument naming the first bad field and its value.
  void validate() const;
};

}  // namespace mtpserve
