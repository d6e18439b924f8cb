#include "kernels/moe_all_experts.h"

#include <ATen/ATen.h>

namespace mtpserve::kernels {

at::Tensor moe_all_experts(const at::Tensor& x, const at::Tensor& gate_up, const at::Tensor& down,
                           const Routing& routing) {
  const int64_t tokens = x.size(0), experts = gate_up.size(0), inter = down.size(2);
  auto gu = at::matmul(gate_up, x.t()).transpose(1, 2);                                   // [E, T, 2I]
  auto h = at::silu(gu.narrow(-1, 0, inter)) * gu.narrow(-1, inter, inter);
  auto y = at::bmm(h, down.transpose(1, 2));                                              // [E, T, H]
  auto w = at::zeros({tokens, experts}, routing.weights.options()).scatter_(1, routing.experts, routing.weights);
  return at::bmm(w.unsqueeze(1), y.to(at::kFloat).transpose(0, 1)).squeeze(1).to(x.scalar_type());  // [T, H]
}

}  // namespace mtpserve::kernels
