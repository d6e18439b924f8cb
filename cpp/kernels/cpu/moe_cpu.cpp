// CPU MoE: noaux_tc routing with torch ops, and the routed experts without scatter-add (slow on CPU).
// A handful of tokens (decode, MTP verify): every expert runs on every token in two batched
// matmuls that read each weight once in place, and unchosen experts get weight 0 — at these
// sizes the cost is per op, not per FLOP, and it stays flat as the rows grow.
// More tokens: group assignments by expert so each active expert runs one matmul.
#include "kernels/cpu/moe_cpu.h"

#include <ATen/ATen.h>

#include <limits>
#include <vector>

#include "kernels/moe_all_experts.h"

namespace mtpserve::kernels::cpu {

namespace {

// Up to this many tokens computing all experts beats grouping by expert.
constexpr int64_t kMaxDenseTokens = 4;

at::Tensor swiglu(const at::Tensor& gate_up, int64_t inter) {
  return at::silu(gate_up.narrow(-1, 0, inter)) * gate_up.narrow(-1, inter, inter);
}

// Grouped by expert, each active expert in one matmul; the outputs are put back in assignment order.
at::Tensor grouped(const at::Tensor& x, const at::Tensor& gate_up, const at::Tensor& down, const at::Tensor& flat,
                   int64_t top_k) {
  const int64_t num_experts = gate_up.size(0), inter = down.size(2);
  const int64_t* chosen = flat.data_ptr<int64_t>();
  std::vector<std::vector<int64_t>> assignments(num_experts);
  for (int64_t i = 0; i < flat.numel(); ++i) assignments[chosen[i]].push_back(i);

  std::vector<at::Tensor> outputs;
  std::vector<int64_t> order;  // assignment index of each output row
  for (int64_t e = 0; e < num_experts; ++e) {
    if (assignments[e].empty()) continue;
    auto tokens = at::floor_divide(at::tensor(at::ArrayRef(assignments[e]), at::kLong), top_k);
    outputs.push_back(at::linear(swiglu(at::linear(x.index_select(0, tokens), gate_up[e]), inter), down[e]));
    order.insert(order.end(), assignments[e].begin(), assignments[e].end());
  }
  std::vector<int64_t> inverse(order.size());
  for (size_t row = 0; row < order.size(); ++row) inverse[order[row]] = static_cast<int64_t>(row);
  return at::cat(outputs).index_select(0, at::tensor(inverse, at::kLong));
}

}  // namespace

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
  const int64_t tokens = x.size(0), top_k = routing.experts.size(1);
  if (tokens <= kMaxDenseTokens) return moe_all_experts(x, gate_up, down, routing);
  auto flat = routing.experts.reshape({-1}).contiguous();
  auto weighted = grouped(x, gate_up, down, flat, top_k).to(at::kFloat) * routing.weights.reshape({-1, 1});
  return weighted.view({tokens, top_k, x.size(1)}).sum(1).to(x.scalar_type());
}

}  // namespace mtpserve::kernels::cpu
