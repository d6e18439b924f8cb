#pragma once
#include <ATen/core/Tensor.h>

#include "kernels/moe.h"

namespace mtpserve::kernels::cpu {

at::Tensor moe_experts(const at::Tensor& x, const at::Tensor& gate_up, const at::Tensor& down, const Routing& routing);

}  // namespace mtpserve::kernels::cpu
