// CPU routed experts, without scatter-add (slow on CPU).
// A handful of tokens (decode, MTP verify): every expert runs on every token in two batched
// matmuls that read each weight once in place, and unchosen experts get weight 0 — at these
// sizes the cost is per op, not per FLOP, and it stays flat as the rows grow.
// More tokens: group assignments by expert so each active expert runs one matmul.
#include "kernels/cpu/moe_experts_cpu.h"

#include <ATen/ATen.h>

#include <vector>

namespace mtpserve::kernels::cpu {

namespace {

// Up to this many tokens computing all experts beats grouping by expert.
constexpr int64_t kMaxDenseTokens = 4;

at::Tensor swiglu(const at::Tensor& gate_up, int64_t inter) {
  return at::silu(gate_up.narrow(-1, 0, inter)) * gate_up.narrow(-1, inter, inter);
}

// [tokens, hidden]: all experts on all tokens, combined with the routing weights.
at::Tensor dense(const at::Tensor& x, const at::Tensor& gate_up, const at::Tensor& down, const Routing& routing) {
  const int64_t tokens = x.size(0), experts = gate_up.size(0);
  auto h = swiglu(at::matmul(gate_up, x.t()).transpose(1, 2), down.size(2));             // [E, T, I]
  auto y = at::bmm(h, down.transpose(1, 2));                                              // [E, T, H]
  auto w = at::zeros({tokens, experts}, routing.weights.options()).scatter_(1, routing.experts, routing.weights);
  return at::bmm(w.unsqueeze(1), y.to(at::kFloat).transpose(0, 1)).squeeze(1);            // [T, H]
}

// The same by expert groups; the groups' outputs are put back in assignment order at the end.
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

at::Tensor moe_experts(const at::Tensor& x, const at::Tensor& gate_up, const at::Tensor& down, const Routing& routing) {
  const int64_t tokens = x.size(0), top_k = routing.experts.size(1);
  if (tokens <= kMaxDenseTokens) return dense(x, gate_up, down, routing).to(x.scalar_type());
  auto flat = routing.experts.reshape({-1}).contiguous();
  auto weighted = grouped(x, gate_up, down, flat, top_k).to(at::kFloat) * routing.weights.reshape({-1, 1});
  return weighted.view({tokens, top_k, x.size(1)}).sum(1).to(x.scalar_type());
}

}  // namespace mtpserve::kernels::cpu
