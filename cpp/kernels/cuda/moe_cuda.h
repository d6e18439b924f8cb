#pragma once
#include "kernels/moe.h"

namespace mtpserve::kernels::cuda {

Routing route_noaux_tc(const at::Tensor& router_logits, const at::Tensor& correction_bias, const RoutingParams& p);
at::Tensor moe_experts(const at::Tensor& x, const at::Tensor& gate_up, const at::Tensor& down, const Routing& routing);
// Every step's experts as GEMVs (moe_gemv.cuh), whatever its size: a token's output is the same in
// any batch (--batch_invariant).
at::Tensor moe_experts_batch_invariant(const at::Tensor& x, const at::Tensor& gate_up, const at::Tensor& down,
                                       const Routing& routing);

}  // namespace mtpserve::kernels::cuda
