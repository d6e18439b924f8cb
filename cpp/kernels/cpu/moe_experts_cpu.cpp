// CPU routed experts. Each (token, k) assignment's output lands in its own row of a
// [tokens * top_k, hidden] buffer that is then summed over k: no scatter-add, which is slow on CPU.
// Few assignments (decode): gather the chosen experts' weights and run two batched matmuls.
// Many (prefill): group assignments by expert so each active expert runs one matmul.
#include "kernels/cpu/moe_experts_cpu.h"

#include <ATen/ATen.h>

#include <vector>

namespace mtpserve::kernels::cpu {

namespace {

// Above this many assignments copying expert weights per assignment costs more than grouping.
constexpr int64_t kMaxGatheredAssignments = 16;

at::Tensor swiglu(const at::Tensor& gate_up, int64_t inter) {
  return at::silu(gate_up.narrow(-1, 0, inter)) * gate_up.narrow(-1, inter, inter);
}

// [tokens * top_k, hidden]: expert outputs in assignment order, by gathered weights.
at::Tensor gathered(const at::Tensor& x, const at::Tensor& gate_up, const at::Tensor& down, const at::Tensor& flat,
                    int64_t top_k) {
  auto rows = x.repeat_interleave(top_k, 0).unsqueeze(2);
  auto h = swiglu(at::bmm(gate_up.index_select(0, flat), rows).squeeze(2), down.size(2));
  return at::bmm(down.index_select(0, flat), h.unsqueeze(2)).squeeze(2);
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
  auto flat = routing.experts.reshape({-1}).contiguous();
  auto per_assignment = tokens * top_k <= kMaxGatheredAssignments ? gathered(x, gate_up, down, flat, top_k)
                                                                   : grouped(x, gate_up, down, flat, top_k);
  auto weighted = per_assignment.to(at::kFloat) * routing.weights.reshape({-1, 1});
  return weighted.view({tokens, top_k, x.size(1)}).sum(1).to(x.scalar_type());
}

}  // namespace mtpserve::kernels::cpu
