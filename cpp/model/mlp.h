#pragma once
// SwiGLU feed-forward: the dense layers and the shared experts. Tensor parallel: each rank owns
// inter / size of the intermediate dim (gate/up rows, down columns) and returns its partial sum.
#include <ATen/core/Tensor.h>

#include <string>

#include "dist/tensor_parallel.h"
#include "kernels/kernel_ops.h"
#include "model/weights.h"

namespace mtpserve {

class DenseMLP {
 public:
  DenseMLP(const Weights& weights, const std::string& prefix, int64_t hidden, int64_t inter, bool batch_invariant,
           const TensorParallel& tp = {});
  at::Tensor operator()(const at::Tensor& x) const;

 private:
  at::Tensor gate_up_;  // [2 * inter, hidden]
  at::Tensor down_;     // [hidden, inter]
  const kernels::KernelOps* ops_;
};

}  // namespace mtpserve
