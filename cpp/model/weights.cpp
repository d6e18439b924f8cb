#include "model/weights.h"

#include <sstream>
#include <stdexcept>

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

}  // namespace mtpserve
