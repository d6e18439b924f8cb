#include "model/weights.h"

#include <ATen/ATen.h>

#include <stdexcept>
#include <string>

#include "dist/tensor_parallel.h"

namespace mtpserve {

namespace {
// Without ostringstream, which crashed in libstdc++'s locale code inside the extension on the lent GPUs'
// torch build.
std::string shape_str(at::IntArrayRef shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}
}  // namespace

at::Tensor Weights::get(const std::string& name, const std::vector<int64_t>& shape) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    throw std::invalid_argument("checkpoint is missing tensor '" + name + "' (expected shape " +
                                shape_str(shape) + ")");
  }
  if (it->second.sizes() != at::IntArrayRef(shape)) {
    throw std::invalid_argument("tensor '" + name + "' has shape " + shape_str(it->second.sizes()) +
                                ", expected " + shape_str(shape));
  }
  return it->second;
}

std::optional<int64_t> tensor_parallel_dim(const std::string& name) {
  auto ends_with = [&](const std::string& suffix) {
    return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  // Column-parallel (output rows split): query/key-value up projections, gate/up, the vocabulary head.
  for (const char* suffix : {"q_b_proj.weight", "q_proj.weight", "kv_b_proj.weight", "gate_proj.weight",
                             "up_proj.weight", "lm_head.weight", "shared_head.head.weight"}) {
    if (ends_with(suffix)) return 0;
  }
  // Row-parallel (input columns split, the partial sums all-reduced): o_proj and down projections.
  for (const char* suffix : {"o_proj.weight", "down_proj.weight"}) {
    if (ends_with(suffix)) return 1;
  }
  return std::nullopt;
}

at::Tensor Weights::get_shard(const std::string& name, const std::vector<int64_t>& full_shape, int64_t rank,
                              int64_t size) const {
  const auto dim = tensor_parallel_dim(name);
  if (!dim) throw std::logic_error("'" + name + "' is not split by tensor parallelism");
  if (size == 1) return get(name, full_shape);
  std::vector<int64_t> shard_shape = full_shape;
  shard_shape[*dim] = shard_size(full_shape[*dim], size, "dimension " + std::to_string(*dim) + " of '" + name + "'");
  auto it = tensors_.find(name);
  if (it != tensors_.end() && it->second.sizes() == at::IntArrayRef(shard_shape)) return it->second;
  return get(name, full_shape).narrow(*dim, rank * shard_shape[*dim], shard_shape[*dim]).contiguous();
}

}  // namespace mtpserve
