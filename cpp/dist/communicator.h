#pragma once
// The collectives the model's layers issue on device tensors, behind one interface so that the layers
// never see a backend: TP's all-reduce and vocabulary all-gather, EP's all-to-all. Every rank of the
// group calls the same collectives in the same order with matching shapes.
#include <ATen/core/Tensor.h>

#include <vector>

namespace mtpserve {

class Communicator {
 public:
  virtual ~Communicator() = default;

  // Sums `t` over the ranks, in place.
  virtual void all_reduce(at::Tensor& t) = 0;
  // Every rank's `t` (the same shape everywhere) concatenated along the last dimension, in rank order.
  virtual at::Tensor all_gather_last_dim(const at::Tensor& t) = 0;
  // Sends in_rows[r] leading rows of `in` (in rank order) to rank r and receives out_rows[r] rows from
  // rank r into `out`, in rank order. `in` and `out` are contiguous and their rows match the counts.
  virtual void all_to_all(at::Tensor& out, const at::Tensor& in, const std::vector<int64_t>& out_rows,
                          const std::vector<int64_t>& in_rows) = 0;
};

}  // namespace mtpserve
