#include "model/mlp.h"

#include <ATen/ATen.h>

namespace mtpserve {

DenseMLP::DenseMLP(const Weights& w, const std::string& p, int64_t hidden, int64_t inter)
    : gate_up_(at::cat({w.get(p + "gate_proj.weight", {inter, hidden}), w.get(p + "up_proj.weight", {inter, hidden})})),
      down_(w.get(p + "down_proj.weight", {hidden, inter})) {}

at::Tensor DenseMLP::operator()(const at::Tensor& x) const {
  auto gu = at::linear(x, gate_up_);
  const int64_t inter = down_.size(1);
  return at::linear(at::silu(gu.narrow(-1, 0, inter)) * gu.narrow(-1, inter, inter), down_);
}

}  // namespace mtpserve
