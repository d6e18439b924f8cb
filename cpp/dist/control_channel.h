#pragma once
// The host side channel rank 0's engine announces step plans on (dist/step_broadcast.h). Plans are
// int64 tensors in host memory, which device collectives (NCCL, HCCL) do not take, so they travel
// apart from the model's collectives (dist/communicator.h).
#include <ATen/core/Tensor.h>

namespace mtpserve {

class ControlChannel {
 public:
  virtual ~ControlChannel() = default;

  // Rank 0's host tensor `t` into every rank's `t` (same shape and dtype everywhere), in place.
  // `unbounded`: no timeout (a worker idling until rank 0's next step; a dead rank 0 still fails it at once).
  virtual void broadcast(at::Tensor& t, bool unbounded) = 0;
};

}  // namespace mtpserve
