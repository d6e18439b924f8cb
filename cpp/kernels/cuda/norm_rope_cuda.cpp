// The per-token ops on the GPU: inputs may be row-strided views (the model normalises and rotates
// narrowed slices of a projection), read in place; outputs are new contiguous tensors.
#include "kernels/cuda/norm_rope_cuda.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>

#include <string>

#include "kernels/cuda/norm_rope.cuh"
#include "kernels/cuda/tensor_args.h"

namespace mtpserve::kernels::cuda {

namespace {

void require_on(const at::Tensor& t, const at::Tensor& like, const char* op, const char* name) {
  require(t.device() == like.device(), std::string(op) + ": " + name + " must be on " + like.device().str() +
                                           ", got " + t.device().str());
}

// t as [rows, last dim] with the last dim contiguous: a view where the layout allows, else a copy.
at::Tensor as_rows(const at::Tensor& t) {
  auto rows = t.dim() == 2 ? t : t.reshape({-1, t.size(-1)});
  return rows.stride(1) == 1 ? rows : rows.contiguous();
}

std::pair<at::Tensor, at::Tensor> norm(const at::Tensor& x_in, const at::Tensor* delta_in, const at::Tensor& weight,
                                       double eps, const char* op) {
  require(x_in.is_cuda() && x_in.dim() >= 1, std::string(op) + ": x must be a CUDA tensor [..., dim]");
  require_on(weight, x_in, op, "weight");
  const int64_t dim = x_in.size(-1);
  require(weight.dim() == 1 && weight.size(0) == dim,
          std::string(op) + ": weight must be [" + std::to_string(dim) + "] (x's last dim)");
  c10::cuda::CUDAGuard guard(x_in.device());
  const DType dtype = dtype_of(x_in, op), weight_dtype = dtype_of(weight, op);
  auto x = as_rows(x_in);
  at::Tensor delta, sum;
  if (delta_in != nullptr) {
    require_on(*delta_in, x_in, op, "delta");
    require(delta_in->sizes() == x_in.sizes() && delta_in->scalar_type() == x_in.scalar_type(),
            std::string(op) + ": delta must have x's shape and dtype");
    delta = as_rows(*delta_in);
    sum = at::empty(x_in.sizes(), x_in.options());
  }
  // The CPU kernel's `weight * normed` promotes: x's dtype when the weight's matches, else fp32.
  const auto out_type = weight.scalar_type() == x_in.scalar_type() ? x_in.scalar_type() : at::kFloat;
  auto out = at::empty(x_in.sizes(), x_in.options().dtype(out_type));
  auto w = weight.contiguous();
  const RmsNormLaunch p{x.data_ptr(),
                        delta_in != nullptr ? delta.data_ptr() : nullptr,
                        w.data_ptr(),
                        delta_in != nullptr ? sum.data_ptr() : nullptr,
                        out.data_ptr(),
                        x.size(0),
                        dim,
                        x.stride(0),
                        delta_in != nullptr ? delta.stride(0) : 0,
                        static_cast<float>(eps),
                        dtype,
                        weight_dtype};
  check_launch(launch_rms_norm(p, stream_of(x_in)), op);
  return {sum, out};
}

}  // namespace

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  return norm(x, nullptr, weight, eps, "rms_norm").second;
}

std::pair<at::Tensor, at::Tensor> add_rms_norm(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& weight,
                                               double eps) {
  return norm(x, &delta, weight, eps, "add_rms_norm");
}

at::Tensor rotary(const at::Tensor& x_in, const at::Tensor& positions, const at::Tensor& cos, const at::Tensor& sin) {
  require(x_in.is_cuda() && x_in.dim() >= 2, "rotary: x must be a CUDA tensor [tokens, ..., rotary dim]");
  for (const auto* t : {&positions, &cos, &sin}) require_on(*t, x_in, "rotary", "positions, cos and sin");
  const int64_t tokens = x_in.size(0), dim = x_in.size(-1);
  require(dim % 2 == 0, "rotary: the rotary dim must be even, got " + std::to_string(dim));
  require(positions.dim() == 1 && positions.size(0) == tokens && positions.scalar_type() == at::kLong,
          "rotary: positions must be int64 [" + std::to_string(tokens) + "] (one per token of x)");
  require(cos.dim() == 2 && cos.sizes() == sin.sizes() && cos.size(1) == dim / 2 &&
              cos.scalar_type() == at::kFloat && sin.scalar_type() == at::kFloat,
          "rotary: cos and sin must be float32 [max_positions, " + std::to_string(dim / 2) + "]");
  c10::cuda::CUDAGuard guard(x_in.device());
  const DType dtype = dtype_of(x_in, "rotary");
  // [tokens, heads, dim]: every middle dim is a head; a 2-D x has one.
  auto x = x_in.dim() == 2 ? x_in.unsqueeze(1) : x_in.dim() == 3 ? x_in : x_in.reshape({tokens, -1, dim});
  if (x.stride(2) != 1) x = x.contiguous();
  auto pos = positions.contiguous();
  auto c = cos.contiguous(), s = sin.contiguous();
  auto out = at::empty(x_in.sizes(), x_in.options());
  const RotaryLaunch p{x.data_ptr(),  out.data_ptr(), pos.data_ptr<int64_t>(), c.data_ptr<float>(),
                       s.data_ptr<float>(), tokens, x.size(1),  dim, x.stride(0), x.stride(1), dtype};
  check_launch(launch_rotary(p, stream_of(x_in)), "rotary");
  return out;
}

void write_latent_kv(const at::Tensor& cache, const at::Tensor& kv_in, const at::Tensor& weight, double eps,
                     const at::Tensor& positions, const at::Tensor& cos, const at::Tensor& sin,
                     const at::Tensor& slot_mapping) {
  const char* op = "write_latent_kv";
  require(kv_in.is_cuda() && kv_in.dim() == 2, "write_latent_kv: kv must be a CUDA tensor [tokens, kv_lora_rank + rope_dim]");
  for (const auto* t : {&cache, &weight, &positions, &cos, &sin, &slot_mapping}) {
    require_on(*t, kv_in, op, "cache, norm weight, positions, cos, sin and slot_mapping");
  }
  const int64_t tokens = kv_in.size(0), lora = weight.size(0), rope = kv_in.size(1) - lora;
  require(weight.dim() == 1 && lora > 0 && rope >= 0 && rope % 2 == 0,
          "write_latent_kv: the norm weight must be [kv_lora_rank] with an even rope part left in kv's " +
              std::to_string(kv_in.size(1)) + " columns");
  require(cache.dim() == 3 && cache.is_contiguous() && cache.size(2) == kv_in.size(1),
          "write_latent_kv: the cache must be a contiguous [blocks, block_size, " + std::to_string(kv_in.size(1)) +
              "] tensor");
  require(cache.scalar_type() == kv_in.scalar_type() && weight.scalar_type() == kv_in.scalar_type(),
          "write_latent_kv: kv, the norm weight and the cache must share one dtype");
  for (const auto* t : {&positions, &slot_mapping}) {
    require(t->dim() == 1 && t->size(0) == tokens && t->scalar_type() == at::kLong,
            "write_latent_kv: positions and slot_mapping must be int64 [" + std::to_string(tokens) + "]");
  }
  require(cos.dim() == 2 && cos.sizes() == sin.sizes() && cos.size(1) == rope / 2 && cos.scalar_type() == at::kFloat &&
              sin.scalar_type() == at::kFloat,
          "write_latent_kv: cos and sin must be float32 [max_positions, " + std::to_string(rope / 2) + "]");
  c10::cuda::CUDAGuard guard(kv_in.device());
  auto kv = kv_in.stride(1) == 1 ? kv_in : kv_in.contiguous();
  auto w = weight.contiguous(), pos = positions.contiguous(), slots = slot_mapping.contiguous();
  auto c = cos.contiguous(), s = sin.contiguous();
  const LatentKvLaunch p{kv.data_ptr(),           w.data_ptr(),          cache.data_ptr(),
                         slots.data_ptr<int64_t>(), pos.data_ptr<int64_t>(), c.data_ptr<float>(),
                         s.data_ptr<float>(),     tokens,                lora,
                         rope,                    kv.stride(0),          cache.size(0) * cache.size(1),
                         static_cast<float>(eps), dtype_of(kv_in, op)};
  check_launch(launch_write_latent_kv(p, stream_of(kv_in)), op);
}

at::Tensor silu_and_mul(const at::Tensor& gate_up_in) {
  require(gate_up_in.is_cuda() && gate_up_in.dim() >= 1, "silu_and_mul: gate_up must be a CUDA tensor [..., 2 * inter]");
  const int64_t width = gate_up_in.size(-1);
  require(width % 2 == 0, "silu_and_mul: the last dim must hold the gate and up halves, got " + std::to_string(width));
  c10::cuda::CUDAGuard guard(gate_up_in.device());
  const DType dtype = dtype_of(gate_up_in, "silu_and_mul");
  auto gate_up = as_rows(gate_up_in);
  auto shape = gate_up_in.sizes().vec();
  shape.back() = width / 2;
  auto out = at::empty(shape, gate_up_in.options());
  const SiluAndMulLaunch p{gate_up.data_ptr(), out.data_ptr(), gate_up.size(0), width / 2, gate_up.stride(0), dtype};
  check_launch(launch_silu_and_mul(p, stream_of(gate_up_in)), "silu_and_mul");
  return out;
}

}  // namespace mtpserve::kernels::cuda
