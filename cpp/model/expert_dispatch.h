#pragma once
// Expert parallelism for one MoE layer: this rank holds `local` routed experts whole, those of global
// index [ep_rank * local, (ep_rank + 1) * local). Every rank of an attention group holds every token row
// of its group's step (attention is tensor parallel inside the group), so each takes a contiguous share of
// the rows, sends each (token, expert) pair of its share to the expert group's rank owning the expert
// (all-to-all dispatch; under data-parallel attention the other groups' rows arrive the same way), computes
// the pairs it receives with the device's expert kernel, and gets their outputs back (all-to-all combine)
// to weight and sum them in the order one rank would. The result holds the rows of this rank's share,
// zeros elsewhere: the layer's all-reduce over the attention group assembles the whole output.
#include <ATen/core/Tensor.h>

#include <array>

#include "dist/tensor_parallel.h"
#include "kernels/kernel_ops.h"

namespace mtpserve {

class ExpertDispatch {
 public:
  ExpertDispatch(const TensorParallel& tp, int64_t local_experts, const kernels::KernelOps& ops);

  // x [tokens, hidden] and its routing over the global experts; gate_up / down: this rank's experts.
  at::Tensor operator()(const at::Tensor& x, const kernels::Routing& routing, const at::Tensor& gate_up,
                        const at::Tensor& down) const;

 private:
  // The first `rows` rows of dispatch buffer `slot`, which keeps the largest size asked for: after the
  // largest step the buffers are never allocated again.
  at::Tensor buffer(size_t slot, int64_t rows, int64_t width, const at::TensorOptions& options) const;

  TensorParallel tp_;
  int64_t local_;
  const kernels::KernelOps* ops_;
  // Sent rows, received rows, returned outputs, sent and received expert ids. A layer runs on the step
  // thread only, one forward at a time.
  mutable std::array<at::Tensor, 5> buffers_;
};

}  // namespace mtpserve
