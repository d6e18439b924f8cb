#include "dist/step_broadcast.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace mtpserve {

namespace {

// A message's first broadcast carries its kind, its payload's length and up to kFrame - 2 values of the
// payload; a longer payload sends the rest in a second one. Over gloo a broadcast costs about the same
// from 2 to 12,000 values (some 250 us each on the 2-core CI machine), so the plan of a small batch
// crosses in one broadcast instead of a header and a payload.
constexpr int64_t kFrame = 4096;

at::Tensor host_longs(int64_t n) { return at::empty({n}, at::kLong); }

}  // namespace

void send_step(const TensorParallel& tp, StepKind kind, std::span<const int64_t> wire) {
  auto frame = host_longs(kFrame);
  int64_t* f = frame.data_ptr<int64_t>();
  const auto size = static_cast<int64_t>(wire.size());
  const int64_t first = std::min(size, kFrame - 2);
  f[0] = static_cast<int64_t>(kind);
  f[1] = size;
  std::copy_n(wire.begin(), first, f + 2);
  tp.control().broadcast(frame, /*unbounded=*/false);
  if (first == size) return;
  auto rest = host_longs(size - first);
  std::copy(wire.begin() + first, wire.end(), rest.data_ptr<int64_t>());
  tp.control().broadcast(rest, /*unbounded=*/false);
}

StepMessage receive_step(const TensorParallel& tp) {
  auto frame = host_longs(kFrame);
  tp.control().broadcast(frame, /*unbounded=*/true);  // workers idle here between requests
  const int64_t* f = frame.data_ptr<int64_t>();
  const int64_t size = f[1], first = std::min(size, kFrame - 2);
  StepMessage message{static_cast<StepKind>(f[0]), std::vector<int64_t>(f + 2, f + 2 + first)};
  if (first == size) return message;
  auto rest = host_longs(size - first);
  tp.control().broadcast(rest, /*unbounded=*/false);
  const int64_t* r = rest.data_ptr<int64_t>();
  message.wire.insert(message.wire.end(), r, r + (size - first));
  return message;
}

}  // namespace mtpserve
