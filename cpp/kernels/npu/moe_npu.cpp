// DeepSeek MoE on the NPU through torch_npu's MoE ops, as vllm-ascend's fused MoE runs them:
// npu_moe_gating_top_k for noaux_tc routing; npu_moe_init_routing_v2 to sort the (token, expert)
// pairs by expert, npu_grouped_matmul for the experts' GEMMs over those groups, npu_swiglu between
// them, and npu_moe_token_unpermute to weight and sum each token's rows (vllm-ascend prefers it to
// npu_moe_finalize_routing for accuracy). Contracts: _op_plugin_docs.py of the torch_npu wheel.
#include "kernels/npu/moe_npu.h"

#include <ATen/ATen.h>

#include <vector>

#include "kernels/npu/npu_op.h"

namespace mtpserve::kernels::npu {

// norm_type 1: sigmoid scores; group_select_mode 1: a group scores the sum of its top-2 experts
// (score + bias); renorm 0 with eps: the chosen experts' unbiased scores over their sum (+ eps),
// times routed_scaling_factor. Outputs (y_out, expert_idx_out int32, norm_out fp32).
Routing route_noaux_tc(const at::Tensor& router_logits, const at::Tensor& correction_bias, const RoutingParams& p) {
  auto logits = router_logits.to(at::kFloat);
  auto out = call_npu_op("npu_moe_gating_top_k", {{"x", logits},
                                                  {"k", p.top_k},
                                                  {"bias", correction_bias.to(at::kFloat)},
                                                  {"k_group", p.topk_group},
                                                  {"group_count", p.n_group},
                                                  {"group_select_mode", int64_t{1}},
                                                  {"renorm", int64_t{0}},
                                                  {"norm_type", int64_t{1}},
                                                  {"out_flag", false},
                                                  {"routed_scaling_factor", p.routed_scaling_factor},
                                                  {"eps", 1e-20}});
  auto experts = out[1].toTensor().to(at::kLong);
  if (p.norm_topk_prob) return {out[0].toTensor().to(at::kFloat), experts};
  // The op always normalises; without norm_topk_prob the weights are the plain sigmoid scores.
  return {out[2].toTensor().gather(1, experts) * p.routed_scaling_factor, experts};
}

// gate_up [E, 2I, H] and down [E, H, I] are stored as torch.nn.Linear weights; npu_grouped_matmul
// multiplies x by weight [E, K, N], so they go in transposed ("支持weight转置": a [K, N] weight with
// strides [1, K] is taken as transposed, no copy).
at::Tensor moe_experts(const at::Tensor& x, const at::Tensor& gate_up, const at::Tensor& down, const Routing& routing) {
  const int64_t tokens = x.size(0), top_k = routing.experts.size(1), num_experts = gate_up.size(0);
  auto routed = call_npu_op("npu_moe_init_routing_v2",
                            {{"x", x},
                             {"expert_idx", routing.experts.to(at::kInt)},
                             {"active_num", tokens * top_k},
                             {"expert_num", num_experts},
                             {"expert_tokens_num_type", int64_t{1}},  // counts per expert
                             {"expert_tokens_num_flag", true},
                             {"active_expert_range", std::vector<int64_t>{0, num_experts}},
                             {"quant_mode", int64_t{-1}}});
  auto sorted_x = routed[0].toTensor(), expanded_row_idx = routed[1].toTensor(), counts = routed[2].toTensor();
  auto grouped = [&](const at::Tensor& rows, const at::Tensor& weight) {
    auto out = call_npu_op("npu_grouped_matmul", {{"x", std::vector<at::Tensor>{rows}},
                                                  {"weight", std::vector<at::Tensor>{weight.transpose(1, 2)}},
                                                  {"group_list", counts},
                                                  {"split_item", int64_t{2}},
                                                  {"group_type", int64_t{0}},
                                                  {"group_list_type", int64_t{1}}});
    return out[0].toTensorList().get(0);
  };
  auto hidden = call_npu_op("npu_swiglu", {{"input", grouped(sorted_x, gate_up)}, {"dim", int64_t{-1}}})[0].toTensor();
  // expanded_row_idx (row_idx_type 0) maps each (token, k) to its sorted row, which is the
  // sorted_indices npu_moe_token_unpermute gathers by: out[i] = sum_k rows[S[i * topK + k]] * probs[i, k]
  // (vllm-ascend passes it the same way). The weights stay fp32, as the CPU kernel applies them; CANN's
  // aclnnMoeTokenUnpermute takes fp32 probs beside 16-bit tokens (the wheel's doc lists only bf16).
  auto out = call_npu_op("npu_moe_token_unpermute", {{"permuted_tokens", grouped(hidden, down)},
                                                     {"sorted_indices", expanded_row_idx.abs()},
                                                     {"probs", routing.weights}});
  return out[0].toTensor();
}

}  // namespace mtpserve::kernels::npu
