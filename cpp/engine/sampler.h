#pragma once
// Turns a step's logits rows into tokens on the compute device: every sequence that samples this
// step gets a plain sample (penalties, temperature, top-k, top-p, min-p; greedy or seeded) or the
// speculative verification of its drafts, all in one batch (kernels/sampling.h), and the tokens
// come back to the host in one copy. A request's grammar masks its rows first (engine/token_masks.h).
// Logprobs are of the model's raw distribution.
#include <ATen/core/Tensor.h>

#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "core/sampling_params.h"
#include "kernels/kernel_ops.h"

namespace mtpserve {

struct SampleRequest {
  const SamplingParams* params;
  std::span<const int64_t> prompt_tokens;  // what the repetition penalty counts besides the output
  std::span<const int64_t> output_tokens;  // what penalties count before this step
  std::span<const int64_t> eos_token_ids;  // masked, with stop_token_ids, before min_tokens
  std::span<const int64_t> drafts;         // verified against rows first_row + 1 ...; may be empty
  uint64_t seed;
  uint64_t first_draw;  // output index of the first token drawn
  int64_t first_row;    // its first logits row; it owns drafts.size() + 1 rows
};

struct TokenLogprobs {
  int64_t token;
  float logprob;
  int64_t rank;                                // 1 = most likely
  std::vector<std::pair<int64_t, float>> top;  // the n most likely (token, logprob)
};

struct SampledSequence {
  std::vector<int64_t> tokens;  // accepted drafts, then the sampled (correction or bonus) token
  int64_t accepted = 0;
  std::vector<TokenLogprobs> logprobs;  // one per token when the request asks for logprobs
};

class Sampler {
 public:
  // masker: fills the masks of requests with a grammar (SamplingParams::constraint); may be null.
  explicit Sampler(const at::Device& device, std::shared_ptr<TokenMasker> masker = nullptr)
      : device_(device), ops_(&kernels::ops_for(device)), masker_(std::move(masker)) {}

  std::vector<SampledSequence> sample(const at::Tensor& logits, const std::vector<SampleRequest>& requests) const;

 private:
  std::vector<SampledSequence> sample_distributions(const at::Tensor& logits,
                                                    const std::vector<SampleRequest>& requests) const;
  std::vector<SampledSequence> sample_argmax(const at::Tensor& logits,
                                             const std::vector<SampleRequest>& requests) const;
  void add_logprobs(const at::Tensor& logits, const std::vector<SampleRequest>& requests,
                    std::vector<SampledSequence>& out) const;

  at::Device device_;
  const kernels::KernelOps* ops_;
  std::shared_ptr<TokenMasker> masker_;
};

}  // namespace mtpserve
