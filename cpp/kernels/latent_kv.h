#pragma once
// The latent rows of a step's new tokens into the paged cache (kernels/attention.h, WriteLatentKvFn):
// the device's fused op where its table has one and the dtypes agree, else the table's RMSNorm,
// rotary and cache-write ops one after the other. Both give the same values.
#include <ATen/core/Tensor.h>

#include "kernels/kernel_ops.h"

namespace mtpserve::kernels {

void write_latent_kv(const KernelOps& ops, const at::Tensor& cache, const at::Tensor& kv, int64_t kv_lora_rank,
                     const at::Tensor& norm_weight, double eps, const at::Tensor& positions, const at::Tensor& cos,
                     const at::Tensor& sin, const at::Tensor& slot_mapping);

}  // namespace mtpserve::kernels
