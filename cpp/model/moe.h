#pragma once
// DeepSeek MoE layer: noaux_tc-routed experts plus always-on shared experts. Tensor parallel: the
// router is replicated, the shared experts are split on their intermediate dim, and the output is
// this rank's partial sum of routed + shared: the caller all-reduces it. The routed experts are split
// on their intermediate dim too, or, under expert parallelism, held whole by their owning rank and
// reached through an all-to-all (model/expert_dispatch.h).
#include <ATen/core/Tensor.h>

#include <optional>
#include <string>

#include "kernels/kernel_ops.h"
#include "model/expert_dispatch.h"
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
  at::Tensor gate_up_;          // [experts, 2 * inter, hidden] (this rank's experts, or every expert's slice)
  at::Tensor down_;             // [experts, hidden, inter]
  std::optional<DenseMLP> shared_;
  const kernels::KernelOps* ops_;
  std::optional<ExpertDispatch> dispatch_;  // under expert parallelism
};

}  // namespace mtpserve
