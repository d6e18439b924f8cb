#pragma once
// Every expert on every token, combined with the routing weights: two batched matmuls that read each
// expert's weights once, in place, with no data-dependent shape. Right for a handful of tokens on the
// CPU, and the GPU's path for dtypes its grouped GEMM does not take. Any device.
#include "kernels/moe.h"

namespace mtpserve::kernels {

at::Tensor moe_all_experts(const at::Tensor& x, const at::Tensor& gate_up, const at::Tensor& down,
                           const Routing& routing);

}  // namespace mtpserve::kernels
