#pragma once
#include <ATen/core/Tensor.h>

#include <utility>

#include "kernels/kernel_ops.h"

namespace mtpserve {

// The residual stream between decoder blocks: the running `sum` and the last block's output `pending`,
// not yet added, so that the next norm adds it in its own launch (add_rms_norm) instead of a separate
// add; `pending` is undefined when there is nothing to add.
struct Residual {
  at::Tensor sum;
  at::Tensor pending;
};

class RMSNorm {
 public:
  RMSNorm(at::Tensor weight, double eps, bool batch_invariant)
      : weight_(std::move(weight)), eps_(eps), ops_(&kernels::ops_for(weight_.device(), batch_invariant)) {}
  // Normalised in fp32 and cast back before the weight, as DeepSeek's reference does.
  at::Tensor operator()(const at::Tensor& x) const { return ops_->rms_norm(x, weight_, eps_); }
  // (x + delta, its norm): the residual add fused into the norm that follows it.
  std::pair<at::Tensor, at::Tensor> add(const at::Tensor& x, const at::Tensor& delta) const {
    return ops_->add_rms_norm(x, delta, weight_, eps_);
  }
  // (the stream's total, its norm).
  std::pair<at::Tensor, at::Tensor> operator()(const Residual& r) const {
    return r.pending.defined() ? add(r.sum, r.pending) : std::pair{r.sum, (*this)(r.sum)};
  }
  const at::Tensor& weight() const { return weight_; }
  double eps() const { return eps_; }

 private:
  at::Tensor weight_;
  double eps_;
  const kernels::KernelOps* ops_;
};

}  // namespace mtpserve
