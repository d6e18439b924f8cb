// Per-token ops of a layer through torch_npu's fused ops (contracts in _op_plugin_docs.py of the
// torch_npu 2.13.0 wheel).
#include "kernels/npu/norm_rope_npu.h"

#include <ATen/ATen.h>

#include <vector>

#include "kernels/npu/npu_op.h"

namespace mtpserve::kernels::npu {

// npu_rms_norm(input, gamma, epsilon) -> (y, rstd): y = gamma * input / rms(input).
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  return call_npu_op("npu_rms_norm", {{"input", x}, {"gamma", weight}, {"epsilon", eps}})[0].toTensor();
}

// npu_add_rms_norm(x1, x2, gamma, epsilon) -> (y, rstd, x): x = x1 + x2 in x1's dtype, y = rms_norm(x).
std::pair<at::Tensor, at::Tensor> add_rms_norm(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& weight,
                                               double eps) {
  auto out = call_npu_op("npu_add_rms_norm", {{"x1", x}, {"x2", delta}, {"gamma", weight}, {"epsilon", eps}});
  return {out[2].toTensor(), out[0].toTensor()};
}

// Our RoPE rotates interleaved pairs and lays the result out de-interleaved. npu_rotary_mul's
// 'half' mode computes r1 * x + r2 * cat(-x2, x1) over the halves (x1, x2) of the last dim, so the
// de-interleaved input [evens, odds] with r1 = [cos, cos], r2 = [sin, sin] gives exactly that
// layout. The op takes 4-D input (BSND: [tokens, 1, N, D]) with cos/sin as [tokens, 1, 1, D].
at::Tensor rotary(const at::Tensor& x, const at::Tensor& positions, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t tokens = x.size(0), dim = x.size(-1);
  auto heads = x.reshape({tokens, 1, -1, dim});
  auto split = at::cat({heads.slice(-1, 0, dim, 2), heads.slice(-1, 1, dim, 2)}, -1);
  auto table = [&](const at::Tensor& t) {
    auto rows = t.index_select(0, positions).to(x.scalar_type());
    return at::cat({rows, rows}, -1).view({tokens, 1, 1, dim});
  };
  auto out = call_npu_op("npu_rotary_mul", {{"input", split},
                                            {"r1", table(cos)},
                                            {"r2", table(sin)},
                                            {"rotary_mode", std::string("half")}});
  return out[0].toTensor().view(x.sizes());
}

// npu_swiglu(input, dim): silu(A) * B for the halves (A, B) of `dim`.
at::Tensor silu_and_mul(const at::Tensor& gate_up) {
  return call_npu_op("npu_swiglu", {{"input", gate_up}, {"dim", int64_t{-1}}})[0].toTensor();
}

}  // namespace mtpserve::kernels::npu
