#include "model/mlp.h"

#include <ATen/ATen.h>

namespace mtpserve {

DenseMLP::DenseMLP(const Weights& w, const std::string& p, int64_t hidden, int64_t inter, bool batch_invariant,
                   const TensorParallel& tp)
    : gate_up_(at::cat({w.get_shard(p + "gate_proj.weight", {inter, hidden}, tp.rank(), tp.size()),
                        w.get_shard(p + "up_proj.weight", {inter, hidden}, tp.rank(), tp.size())})),
      down_(w.get_shard(p + "down_proj.weight", {hidden, inter}, tp.rank(), tp.size())),
      ops_(&kernels::ops_for(down_.device(), batch_invariant)) {}

at::Tensor DenseMLP::operator()(const at::Tensor& x) const {
  return ops_->linear(ops_->silu_and_mul(ops_->linear(x, gate_up_)), down_);
}

}  // namespace mtpserve
