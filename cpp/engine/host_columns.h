#pragma once
// Moving host-built index and parameter columns to the device in one copy.
#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace mtpserve {

// Concatenates host columns into one buffer (pinned on a GPU: a copy from pageable memory would wait for
// the step's kernels), copies it once and returns a view per column.
template <typename T>
std::vector<at::Tensor> to_device(const std::vector<const std::vector<T>*>& columns, at::ScalarType dtype,
                                  const at::Device& device) {
  int64_t total = 0;
  for (const auto* c : columns) total += static_cast<int64_t>(c->size());
  auto host = at::empty({total}, at::TensorOptions(dtype).pinned_memory(device.is_cuda()));
  T* dst = host.data_ptr<T>();
  for (const auto* c : columns) dst = std::copy(c->begin(), c->end(), dst);
  auto buffer = host.to(device, /*non_blocking=*/true);
  std::vector<at::Tensor> views;
  int64_t offset = 0;
  for (const auto* c : columns) {
    views.push_back(buffer.narrow(0, offset, static_cast<int64_t>(c->size())));
    offset += static_cast<int64_t>(c->size());
  }
  return views;
}

}  // namespace mtpserve
