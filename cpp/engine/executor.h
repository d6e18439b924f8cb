#pragma once
// Runs the target model over one step and returns the logits rows to sample from.
#include <ATen/core/Tensor.h>

#include <vector>

#include "engine/step_input.h"
#include "model/deepseek_v3.h"

namespace mtpserve {

struct ExecutorOutput {
  at::Tensor logits;  // [samples, vocab] for StepInput::sample_rows
  at::Tensor hidden;  // [tokens, hidden] final-norm hidden states of every fed row
};

class Executor {
 public:
  Executor(const DeepSeekV3& target, std::vector<at::Tensor> caches) : target_(target), caches_(std::move(caches)) {}

  ExecutorOutput run(const StepInput& input) const;

 private:
  const DeepSeekV3& target_;
  std::vector<at::Tensor> caches_;
};

}  // namespace mtpserve
