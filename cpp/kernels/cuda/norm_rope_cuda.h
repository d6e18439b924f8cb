#pragma once
#include "kernels/attention.h"
#include "kernels/norm_rope.h"

namespace mtpserve::kernels::cuda {

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);
std::pair<at::Tensor, at::Tensor> add_rms_norm(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& weight,
                                               double eps);
at::Tensor rotary(const at::Tensor& x, const at::Tensor& positions, const at::Tensor& cos, const at::Tensor& sin);
at::Tensor silu_and_mul(const at::Tensor& gate_up);
void write_latent_kv(const at::Tensor& cache, const at::Tensor& kv, const at::Tensor& weight, double eps,
                     const at::Tensor& positions, const at::Tensor& cos, const at::Tensor& sin,
                     const at::Tensor& slot_mapping);

}  // namespace mtpserve::kernels::cuda
