#pragma once
// Tensor parallelism over a c10d process group: this rank's place in the group and the three
// collectives the model and the engine need. A default-constructed TensorParallel is one rank
// (size 1): nothing is sharded and no collective is ever issued, so single-rank numerics are
// exactly those of the unsharded model.
#include <ATen/core/Tensor.h>

#include <memory>
#include <string>

namespace mtpserve {

class Communicator;

class TensorParallel {
 public:
  TensorParallel() = default;
  // The group is looked up by name in c10d's process-group registry (torch.distributed registers
  // every group it creates there), so no ProcessGroup object crosses the pybind11 boundary.
  static TensorParallel from_group_name(const std::string& group_name, double timeout_s);

  int64_t rank() const { return rank_; }
  int64_t size() const { return size_; }
  bool enabled() const { return size_ > 1; }

  // Sums `t` over the ranks, in place; a no-op on one rank.
  void all_reduce(at::Tensor& t) const;
  // Concatenates every rank's `t` along the last dimension (rank order); `t` itself on one rank.
  at::Tensor all_gather_last_dim(const at::Tensor& t) const;
  // Rank 0's `t` into every rank's `t` (same shape and dtype everywhere), in place. `unbounded`:
  // no timeout (a worker idling until rank 0's next step; a dead rank 0 still fails it at once).
  void broadcast(at::Tensor& t, bool unbounded = false) const;

 private:
  int64_t rank_ = 0, size_ = 1;
  std::shared_ptr<Communicator> comm_;
};

// The [rank * n / size, (rank + 1) * n / size) slice of `n` along a dimension; throws a clear
// error when size does not divide n.
int64_t shard_size(int64_t n, int64_t size, const std::string& what);

}  // namespace mtpserve
