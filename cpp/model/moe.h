#pragma once
// DeepSeek MoE layer: noaux_tc-routed experts plus always-on shared experts. Tensor parallel:
// the router is replicated, every expert (routed and shared) is split on its intermediate dim,
// and the output is this rank's partial sum of routed + shared: the caller all-reduces it.
#include <ATen/core/Tensor.h>

#include <optional>
#include <string>

#include "kernels/kernel_ops.h"
#include "model/mlp.h"
#include "model/model_config.h"
#include "model/weights.h"

namespace mtpserve {

class MoE {
 public:
  MoE(const ModelConfig& config, const Weights& weights, const std::string& prefix, const TensorParallel& tp = {});
  at::Tensor operator()(const at::Tensor& x) const;

 private:
  kernels::RoutingParams routing_;
  at::Tensor gate_;             // [experts, hidden] float32
  at::Tensor correction_bias_;  // [experts] float32
  at::Tensor gate_up_;          // [experts, 2 * inter, hidden]
  at::Tensor down_;             // [experts, hidden, inter]
  std::optional<DenseMLP> shared_;
  const kernels::KernelOps* ops_;
};

}  // namespace mtpserve
