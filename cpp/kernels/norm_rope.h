#pragma once
// Normalisation, rotary embedding and the gated activation: the small per-token ops of a layer.
#include <ATen/core/Tensor.h>

#include <utility>

namespace mtpserve::kernels {

// weight * (x / sqrt(mean(x^2) + eps)), normalised in fp32 and cast to x's dtype before the weight
// is applied (DeepSeek's reference order). x: [tokens, dim].
using RmsNormFn = at::Tensor (*)(const at::Tensor& x, const at::Tensor& weight, double eps);

// (sum, rms_norm(sum)) with sum = x + delta rounded to x's dtype: the residual add fused with the
// next layer norm.
using AddRmsNormFn = std::pair<at::Tensor, at::Tensor> (*)(const at::Tensor& x, const at::Tensor& delta,
                                                           const at::Tensor& weight, double eps);

// Interleaved-pair rotary embedding over the last dim R of x [tokens, ..., R]: pair (x[2i], x[2i+1])
// is rotated by the angle of (position, i), and the result is laid out de-interleaved,
// [x0', x2', ..., x1', x3', ...] (as DeepSeek-V3's rope_interleave). cos/sin: [max_positions, R / 2]
// float32 (YaRN scaling already folded in); positions: [tokens] int64.
using RotaryFn = at::Tensor (*)(const at::Tensor& x, const at::Tensor& positions, const at::Tensor& cos,
                                const at::Tensor& sin);

// silu(gate_up[..., :I]) * gate_up[..., I:] for gate_up [tokens, 2I].
using SiluAndMulFn = at::Tensor (*)(const at::Tensor& gate_up);

}  // namespace mtpserve::kernels
