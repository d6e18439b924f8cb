#pragma once
// DeepSeek MoE layer: noaux_tc-routed experts plus always-on shared experts.
#include <ATen/core/Tensor.h>

#include <optional>
#include <string>

#include "kernels/moe.h"
#include "model/mlp.h"
#include "model/model_config.h"
#include "model/weights.h"

namespace mtpserve {

class MoE {
 public:
  MoE(const ModelConfig& config, const Weights& weights, const std::string& prefix);
  at::Tensor operator()(const at::Tensor& x) const;

 private:
  kernels::RoutingParams routing_;
  at::Tensor gate_;             // [experts, hidden] float32
  at::Tensor correction_bias_;  // [experts] float32
  at::Tensor gate_up_;          // [experts, 2 * inter, hidden]
  at::Tensor down_;             // [experts, hidden, inter]
  std::optional<DenseMLP> shared_;
};

}  // namespace mtpserve
