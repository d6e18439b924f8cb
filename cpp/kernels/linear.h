#pragma once
// The GEMMs of a layer: a projection by a weight matrix and the per-head matmuls of absorbed MLA.
// Devices may leave these unset in their KernelOps; ops_for() fills them with the generic torch
// versions below (at::linear / at::bmm), which run on any device.
#include <ATen/core/Tensor.h>

namespace mtpserve::kernels {

// x [..., K] times weight [N, K] transposed: [..., N] in x's dtype (x and weight share a dtype).
using LinearFn = at::Tensor (*)(const at::Tensor& x, const at::Tensor& weight);

// Per-head matmul: x [tokens, heads, K] times weight [heads, K, N]: [tokens, heads, N] (may be a
// strided view).
using HeadMatmulFn = at::Tensor (*)(const at::Tensor& x, const at::Tensor& weight);

at::Tensor torch_linear(const at::Tensor& x, const at::Tensor& weight);
at::Tensor torch_head_matmul(const at::Tensor& x, const at::Tensor& weight);

}  // namespace mtpserve::kernels
