#include "model/weights.h"

#include <ATen/ATen.h>

#include <sstream>
#include <stdexcept>

#include "dist/tensor_parallel.h"

namespace mtpserve {

namespace {
std::string shape_str(at::IntArrayRef shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
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

at::Tensor Weights::get_shard(const std::string& name, const std::vector<int64_t>& full_shape, int64_t dim,
                              int64_t rank, int64_t size) const {
  at::Tensor full = get(name, full_shape);
  if (size == 1) return full;
  const int64_t part = shard_size(full_shape[dim], size, "dimension " + std::to_string(dim) + " of '" + name + "'");
  return full.narrow(dim, rank * part, part).contiguous();
}

}  // namespace mtpserve
