#pragma once
// DeepSeek MoE kernels: noaux_tc grouped routing and the routed-expert computation.
#include <ATen/core/Tensor.h>

namespace mtpserve::kernels {

struct RoutingParams {
  int64_t n_group = 1;
  int64_t topk_group = 1;
  int64_t top_k = 1;
  bool norm_topk_prob = true;
  double routed_scaling_factor = 1.0;
};

struct Routing {
  at::Tensor weights;  // [tokens, top_k] float32
  at::Tensor experts;  // [tokens, top_k] int64
};

// Sigmoid scores of router_logits [tokens, experts] (fp32); experts are chosen on score +
// correction bias within the best topk_group groups (group score = sum of its top-2), weighted by
// their unbiased scores (normalised when norm_topk_prob) times routed_scaling_factor. Ties go to
// the lower expert index, as torch.topk's do.
using RouteFn = Routing (*)(const at::Tensor& router_logits, const at::Tensor& correction_bias,
                            const RoutingParams& params);

// sum_k weight_k * down_e(silu(gate_e(x)) * up_e(x)) over each token's chosen experts, in x's dtype.
// gate_up: [experts, 2 * inter, hidden]; down: [experts, hidden, inter]. Only the chosen experts'
// weights need to be read.
using MoeExpertsFn = at::Tensor (*)(const at::Tensor& x, const at::Tensor& gate_up, const at::Tensor& down,
                                    const Routing& routing);

}  // namespace mtpserve::kernels
