#pragma once
// Named checkpoint tensors, handed over from the Python loader; every lookup
// checks the shape so a wrong checkpoint fails with the tensor's name.
#include <ATen/core/Tensor.h>

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace mtpserve {

// "model.layers.{layer}.": where a decoder layer's (or MTP module's) tensors live.
inline std::string layer_prefix(int64_t layer) { return "model.layers." + std::to_string(layer) + "."; }

// The dimension tensor parallelism splits a checkpoint tensor along (attention heads, MLP and expert
// intermediate rows, vocabulary rows of the head), or none when every rank holds it whole. The loader
// reads only a rank's slice of these; the model's layers take the slices.
std::optional<int64_t> tensor_parallel_dim(const std::string& name);

// The stacked routed experts of an MoE layer under `prefix` ("model.layers.N.mlp."), which the loader
// builds from the per-expert tensors: [experts, 2 * inter, hidden] (gate rows, then up rows) and
// [experts, hidden, inter], inter being this rank's share.
inline std::string stacked_gate_up(const std::string& prefix) { return prefix + "experts.gate_up_proj"; }
inline std::string stacked_down(const std::string& prefix) { return prefix + "experts.down_proj"; }

class Weights {
 public:
  explicit Weights(std::unordered_map<std::string, at::Tensor> tensors) : tensors_(std::move(tensors)) {}

  at::Tensor get(const std::string& name, const std::vector<int64_t>& shape) const;
  // Rank `rank`'s 1/size slice along tensor_parallel_dim(name) of the tensor of shape `full_shape`:
  // the tensor itself when the loader read only that slice (or size is 1), else a copy of the slice.
  at::Tensor get_shard(const std::string& name, const std::vector<int64_t>& full_shape, int64_t rank,
                       int64_t size) const;
  bool contains(const std::string& name) const { return tensors_.count(name) > 0; }

 private:
  std::unordered_map<std::string, at::Tensor> tensors_;
};

}  // namespace mtpserve
