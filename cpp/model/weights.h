#pragma once
// Named checkpoint tensors, handed over from the Python loader; every lookup
// checks the shape so a wrong checkpoint fails with the tensor's name.
#include <ATen/core/Tensor.h>

#include <string>
#include <unordered_map>
#include <vector>

namespace mtpserve {

// "model.layers.{layer}.": where a decoder layer's (or MTP module's) tensors live.
inline std::string layer_prefix(int64_t layer) { return "model.layers." + std::to_string(layer) + "."; }

class Weights {
 public:
  explicit Weights(std::unordered_map<std::string, at::Tensor> tensors) : tensors_(std::move(tensors)) {}

  at::Tensor get(const std::string& name, const std::vector<int64_t>& shape) const;
  // Rank `rank`'s 1/size slice along `dim` of the tensor of shape `full_shape` (tensor
  // parallelism); the tensor itself, uncopied, when size is 1.
  at::Tensor get_shard(const std::string& name, const std::vector<int64_t>& full_shape, int64_t dim, int64_t rank,
                       int64_t size) const;
  bool contains(const std::string& name) const { return tensors_.count(name) > 0; }

 private:
  std::unordered_map<std::string, at::Tensor> tensors_;
};

}  // namespace mtpserve
