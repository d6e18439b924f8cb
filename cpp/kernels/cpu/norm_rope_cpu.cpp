#include "kernels/cpu/norm_rope_cpu.h"

#include <ATen/ATen.h>

#include <vector>

namespace mtpserve::kernels::cpu {

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  auto xf = x.to(at::kFloat);
  auto normed = xf * at::rsqrt(xf.pow(2).mean(-1, true) + eps);
  return weight * normed.to(x.scalar_type());
}

std::pair<at::Tensor, at::Tensor> add_rms_norm(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& weight,
                                               double eps) {
  auto sum = x + delta;
  return {sum, rms_norm(sum, weight, eps)};
}

at::Tensor rotary(const at::Tensor& x, const at::Tensor& positions, const at::Tensor& cos, const at::Tensor& sin) {
  std::vector<int64_t> shape(x.dim(), 1);
  shape[0] = positions.size(0);
  shape.back() = cos.size(1);
  auto c = cos.index_select(0, positions).view(shape).to(x.scalar_type());
  auto s = sin.index_select(0, positions).view(shape).to(x.scalar_type());
  auto even = x.slice(-1, 0, x.size(-1), 2);
  auto odd = x.slice(-1, 1, x.size(-1), 2);
  return at::cat({even * c - odd * s, odd * c + even * s}, -1);
}

at::Tensor silu_and_mul(const at::Tensor& gate_up) {
  const int64_t inter = gate_up.size(-1) / 2;
  return at::silu(gate_up.narrow(-1, 0, inter)) * gate_up.narrow(-1, inter, inter);
}

}  // namespace mtpserve::kernels::cpu
