#include "kernels/moe.h"

#include <ATen/ATen.h>

#include <limits>
#include <stdexcept>

#include "kernels/cpu/moe_experts_cpu.h"

namespace mtpserve::kernels {

Routing route_noaux_tc(const at::Tensor& router_logits, const at::Tensor& correction_bias, const RoutingParams& p) {
  const int64_t tokens = router_logits.size(0), experts = router_logits.size(1);
  auto scores = router_logits.to(at::kFloat).sigmoid();
  auto choice = scores + correction_bias;
  auto group_scores = std::get<0>(choice.view({tokens, p.n_group, experts / p.n_group}).topk(2, -1)).sum(-1);
  auto groups = std::get<1>(group_scores.topk(p.topk_group, -1, true, false));
  auto group_mask = at::zeros_like(group_scores).scatter_(1, groups, 1.0).to(at::kBool);
  auto expert_mask = group_mask.unsqueeze(-1).expand({tokens, p.n_group, experts / p.n_group}).reshape({tokens, experts});
  choice = choice.masked_fill(expert_mask.logical_not(), -std::numeric_limits<float>::infinity());
  auto chosen = std::get<1>(choice.topk(p.top_k, -1, true, false));
  auto weights = scores.gather(1, chosen);
  if (p.norm_topk_prob) weights = weights / (weights.sum(-1, true) + 1e-20);
  return {weights * p.routed_scaling_factor, chosen};
}

at::Tensor moe_experts(const at::Tensor& x, const at::Tensor& gate_up, const at::Tensor& down, const Routing& routing) {
  if (x.is_cpu()) return cpu::moe_experts(x, gate_up, down, routing);
  throw std::runtime_error("moe_experts: no kernel for device " + x.device().str());
}

}  // namespace mtpserve::kernels
