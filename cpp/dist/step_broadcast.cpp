#include "dist/step_broadcast.h"

#include <ATen/ATen.h>

namespace mtpserve {

void send_step(const TensorParallel& tp, StepKind kind, std::span<const int64_t> wire, std::span<const int64_t> rows) {
  auto header = at::tensor({static_cast<int64_t>(kind), static_cast<int64_t>(wire.size()),
                            static_cast<int64_t>(rows.size())}, at::kLong);
  tp.broadcast(header);
  if (wire.empty() && rows.empty()) return;
  auto payload = at::empty({static_cast<int64_t>(wire.size() + rows.size())}, at::kLong);
  std::copy(wire.begin(), wire.end(), payload.data_ptr<int64_t>());
  std::copy(rows.begin(), rows.end(), payload.data_ptr<int64_t>() + wire.size());
  tp.broadcast(payload);
}

StepMessage receive_step(const TensorParallel& tp) {
  auto header = at::empty({3}, at::kLong);
  tp.broadcast(header, /*unbounded=*/true);  // workers idle here between requests
  const int64_t* h = header.data_ptr<int64_t>();
  StepMessage message{static_cast<StepKind>(h[0])};
  const int64_t wire = h[1], rows = h[2];
  if (wire + rows == 0) return message;
  auto payload = at::empty({wire + rows}, at::kLong);
  tp.broadcast(payload);
  const int64_t* p = payload.data_ptr<int64_t>();
  message.wire.assign(p, p + wire);
  message.rows.assign(p + wire, p + wire + rows);
  return message;
}

}  // namespace mtpserve
