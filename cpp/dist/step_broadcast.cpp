#include "dist/step_broadcast.h"

#include <ATen/ATen.h>

namespace mtpserve {

void send_step(const TensorParallel& tp, StepKind kind, std::span<const int64_t> wire) {
  auto header = at::tensor({static_cast<int64_t>(kind), static_cast<int64_t>(wire.size())}, at::kLong);
  tp.control().broadcast(header, /*unbounded=*/false);
  if (wire.empty()) return;
  auto payload = at::empty({static_cast<int64_t>(wire.size())}, at::kLong);
  std::copy(wire.begin(), wire.end(), payload.data_ptr<int64_t>());
  tp.control().broadcast(payload, /*unbounded=*/false);
}

StepMessage receive_step(const TensorParallel& tp) {
  auto header = at::empty({2}, at::kLong);
  tp.control().broadcast(header, /*unbounded=*/true);  // workers idle here between requests
  const int64_t* h = header.data_ptr<int64_t>();
  StepMessage message{static_cast<StepKind>(h[0])};
  if (h[1] == 0) return message;
  auto payload = at::empty({h[1]}, at::kLong);
  tp.control().broadcast(payload, /*unbounded=*/false);
  message.wire.assign(payload.data_ptr<int64_t>(), payload.data_ptr<int64_t>() + h[1]);
  return message;
}

}  // namespace mtpserve
