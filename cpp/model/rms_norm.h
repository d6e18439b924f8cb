#pragma once
#include <ATen/core/Tensor.h>

namespace mtpserve {

class RMSNorm {
 public:
  RMSNorm(at::Tensor weight, double eps) : weight_(std::move(weight)), eps_(eps) {}
  // Normalised in fp32 and cast back before the weight, as DeepSeek's reference does.
  at::Tensor operator()(const at::Tensor& x) const;

 private:
  at::Tensor weight_;
  double eps_;
};

}  // namespace mtpserve
