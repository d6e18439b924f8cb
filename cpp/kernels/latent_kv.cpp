#include "kernels/latent_kv.h"

#include <ATen/ATen.h>

namespace mtpserve::kernels {

void write_latent_kv(const KernelOps& ops, const at::Tensor& cache, const at::Tensor& kv, int64_t kv_lora_rank,
                     const at::Tensor& norm_weight, double eps, const at::Tensor& positions, const at::Tensor& cos,
                     const at::Tensor& sin, const at::Tensor& slot_mapping) {
  const bool one_dtype = norm_weight.scalar_type() == kv.scalar_type() && cache.scalar_type() == kv.scalar_type();
  if (ops.write_latent_kv != nullptr && one_dtype) {
    ops.write_latent_kv(cache, kv, norm_weight, eps, positions, cos, sin, slot_mapping);
    return;
  }
  const int64_t rope_dim = kv.size(1) - kv_lora_rank;
  auto latent = at::cat({ops.rms_norm(kv.narrow(1, 0, kv_lora_rank), norm_weight, eps),
                         ops.rotary(kv.narrow(1, kv_lora_rank, rope_dim), positions, cos, sin)},
                        -1);
  ops.write_latent_cache(cache, latent, slot_mapping);
}

}  // namespace mtpserve::kernels
