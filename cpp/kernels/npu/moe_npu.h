#pragma once
#include "kernels/moe.h"

namespace mtpserve::kernels::npu {

Routing route_noaux_tc(const at::Tensor& router_logits, const at::Tensor& correction_bias, const RoutingParams& params);
at::Tensor moe_experts(const at::Tensor& x, const at::Tensor& gate_up, const at::Tensor& down, const Routing& routing);

}  // namespace mtpserve::kernels::npu
