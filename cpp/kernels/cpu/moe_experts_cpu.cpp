// CPU routed experts: tokens are grouped by expert so each active expert runs one matmul
// over all of its tokens.
#include "kernels/cpu/moe_experts_cpu.h"

#include <ATen/ATen.h>

#include <vector>

namespace mtpserve::kernels::cpu {

at::Tensor moe_experts(const at::Tensor& x, const at::Tensor& gate_up, const at::Tensor& down, const Routing& routing) {
  const int64_t num_experts = gate_up.size(0), inter = down.size(2), top_k = routing.experts.size(1);
  auto experts = routing.experts.contiguous();
  const int64_t* chosen = experts.data_ptr<int64_t>();
  std::vector<std::vector<int64_t>> assignments(num_experts);  // flat (token * top_k + k) per expert
  for (int64_t i = 0; i < experts.numel(); ++i) assignments[chosen[i]].push_back(i);

  auto flat_weights = routing.weights.reshape({-1});
  auto out = at::zeros({x.size(0), x.size(1)}, x.options().dtype(at::kFloat));
  for (int64_t e = 0; e < num_experts; ++e) {
    if (assignments[e].empty()) continue;
    auto flat = at::tensor(at::ArrayRef(assignments[e]), at::kLong);
    auto tokens = at::floor_divide(flat, top_k);
    auto gu = at::linear(x.index_select(0, tokens), gate_up[e]);
    auto h = at::silu(gu.narrow(1, 0, inter)) * gu.narrow(1, inter, inter);
    auto y = at::linear(h, down[e]) * flat_weights.index_select(0, flat).unsqueeze(1);
    out.index_add_(0, tokens, y.to(at::kFloat));
  }
  return out.to(x.scalar_type());
}

}  // namespace mtpserve::kernels::cpu
