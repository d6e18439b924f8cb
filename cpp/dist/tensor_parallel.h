#pragma once
// This rank's place in its group of ranks, and the collectives the model and the engine issue through
// it. A default-constructed TensorParallel is one rank (size 1): nothing is sharded and no collective is
// ever issued, so single-rank numerics are exactly those of the unsharded model.
//
// Layout: attention heads, dense/shared MLP intermediate dims and the vocabulary are split over the ranks
// of this rank's attention group (tensor parallel; under data-parallel attention the world holds several
// such groups). The routed experts are either split on their intermediate dim too, or, with expert
// parallelism, held whole: expert-group rank r owns experts [r * n / ep_size, (r + 1) * n / ep_size). The
// expert group spans every rank of the world, so it is the attention group itself when there is one group.
#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "dist/control_channel.h"

namespace mtpserve {

class TensorParallel {
 public:
  TensorParallel() = default;
  // The groups are looked up by name in c10d's process-group registry, so no ProcessGroup object crosses
  // the pybind11 boundary. `data_group` carries the model's collectives (NCCL on GPUs, gloo on the CPU),
  // `control_group` the step plans (gloo; it may be the data group itself on the CPU), `expert_group` (empty:
  // no expert parallelism) the all-to-alls of the routed experts.
  static TensorParallel from_group_names(const std::string& data_group, const std::string& control_group,
                                         double timeout_s, const std::string& expert_group);

  int64_t rank() const { return rank_; }
  int64_t size() const { return size_; }
  bool enabled() const { return size_ > 1; }
  bool expert_parallel() const { return ep_size_ > 1; }
  int64_t ep_rank() const { return ep_rank_; }
  int64_t ep_size() const { return ep_size_; }

  // Sums `t` over the ranks, in place; a no-op on one rank.
  void all_reduce(at::Tensor& t) const;
  // Concatenates every rank's `t` along the last dimension (rank order); `t` itself on one rank.
  at::Tensor all_gather_last_dim(const at::Tensor& t) const;
  // Communicator::all_to_all over the expert group; `out` is `in` without expert parallelism.
  void all_to_all(at::Tensor& out, const at::Tensor& in, const std::vector<int64_t>& out_rows,
                  const std::vector<int64_t>& in_rows) const;
  // The step plans' channel; only a group of more than one rank has one.
  ControlChannel& control() const;

 private:
  int64_t rank_ = 0, size_ = 1, ep_rank_ = 0, ep_size_ = 1;
  std::shared_ptr<Communicator> comm_, expert_comm_;
  std::shared_ptr<ControlChannel> control_;
};

// The [rank * n / size, (rank + 1) * n / size) slice of `n` along a dimension; throws a clear
// error when size does not divide n.
int64_t shard_size(int64_t n, int64_t size, const std::string& what);

}  // namespace mtpserve
