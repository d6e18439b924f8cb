#include "kernels/cuda/batch_invariant_cuda.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>

#include <string>

#include "kernels/cuda/attention_cuda.h"
#include "kernels/cuda/moe_cuda.h"
#include "kernels/cuda/row_invariant_gemm.cuh"
#include "kernels/cuda/tensor_args.h"

namespace mtpserve::kernels::cuda {

namespace {

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Built only when a check fails (no stream formatting on the step path).
std::string shape_of(const at::Tensor& t) {
  std::string s = "[";
  for (int64_t d = 0; d < t.dim(); ++d) s += (d ? ", " : "") + std::to_string(t.size(d));
  return s + "]";
}

void fail(const std::string& message) { throw std::invalid_argument(message); }

}  // namespace

at::Tensor row_invariant_linear(const at::Tensor& x, const at::Tensor& weight) {
  if (!x.is_cuda() || weight.device() != x.device() || weight.dim() != 2 || x.size(-1) != weight.size(1) ||
      weight.scalar_type() != x.scalar_type()) {
    fail("linear (--batch_invariant): x [..., K] and weight [N, K] must share a CUDA device and dtype, got " +
         shape_of(x) + " and " + shape_of(weight));
  }
  c10::cuda::CUDAGuard guard(x.device());
  const int64_t k = weight.size(1), n = weight.size(0);
  auto flat = x.reshape({-1, k});
  if (flat.stride(1) != 1) flat = flat.contiguous();
  auto w = weight.contiguous();
  auto out_shape = x.sizes().vec();
  out_shape.back() = n;
  auto out = at::empty({flat.size(0), n}, x.options());
  const int64_t elems = 16 / x.element_size();
  if (k % elems != 0 || flat.stride(0) % elems != 0 || n % kLinearColumnMultiple != 0 ||
      !aligned16(flat.data_ptr()) || !aligned16(w.data_ptr())) {
    fail("linear (--batch_invariant): needs K a multiple of " + std::to_string(elems) + " and N of " +
         std::to_string(kLinearColumnMultiple) + " with 16-byte aligned rows, got weight " + shape_of(weight));
  }
  const RowInvariantLinearLaunch p{flat.data_ptr(), w.data_ptr(), out.data_ptr(), flat.size(0), n, k,
                                   flat.stride(0), dtype_of(x, "linear")};
  check_launch(launch_row_invariant_linear(p, stream_of(x)), "linear (--batch_invariant)");
  return out.view(out_shape);
}

at::Tensor row_invariant_head_matmul(const at::Tensor& x_in, const at::Tensor& weight) {
  if (!x_in.is_cuda() || x_in.dim() != 3 || weight.dim() != 3 || weight.device() != x_in.device() ||
      x_in.size(1) != weight.size(0) || x_in.size(2) != weight.size(1) || weight.scalar_type() != x_in.scalar_type() ||
      weight.size(1) > kMaxHeadMatmulK) {
    fail("head_matmul (--batch_invariant): x [tokens, heads, K] and weight [heads, K, N] (K <= " +
         std::to_string(kMaxHeadMatmulK) + ") must share a CUDA device and dtype, got " + shape_of(x_in) + " and " +
         shape_of(weight));
  }
  c10::cuda::CUDAGuard guard(x_in.device());
  auto x = x_in.stride(2) == 1 ? x_in : x_in.contiguous();
  auto w = weight.contiguous();
  const int64_t rows = x.size(0), heads = x.size(1), k = x.size(2), n = w.size(2);
  auto out = at::empty({rows, heads, n}, x.options());
  const RowInvariantHeadMatmulLaunch p{x.data_ptr(), w.data_ptr(), out.data_ptr(), rows, heads, k, n,
                                       x.stride(0), x.stride(1), dtype_of(x, "head_matmul")};
  check_launch(launch_row_invariant_head_matmul(p, stream_of(x)), "head_matmul (--batch_invariant)");
  return out;
}

// The fast table with the four ops whose rounding depends on the step's shape swapped out.
const KernelOps& batch_invariant_ops() {
  static const KernelOps table = [] {
    KernelOps t = ops();
    t.mla_attention = mla_attention_batch_invariant;
    t.moe_experts = moe_experts_batch_invariant;
    t.linear = row_invariant_linear;
    t.head_matmul = row_invariant_head_matmul;
    return t;
  }();
  return table;
}

}  // namespace mtpserve::kernels::cuda
