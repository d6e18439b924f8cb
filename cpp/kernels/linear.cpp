#include "kernels/linear.h"

#include <ATen/ATen.h>

namespace mtpserve::kernels {

at::Tensor torch_linear(const at::Tensor& x, const at::Tensor& weight) { return at::linear(x, weight); }

at::Tensor torch_head_matmul(const at::Tensor& x, const at::Tensor& weight) {
  return at::bmm(x.transpose(0, 1), weight).transpose(0, 1);
}

}  // namespace mtpserve::kernels
