#pragma once
// A tensor-parallel worker (ranks 1..N-1): no scheduler and no sampling; it runs the forwards
// rank 0's engine announces (dist/step_broadcast.h) with this rank's shards, so that every
// collective inside them meets its peers, until rank 0 sends shutdown.
#include <ATen/core/Tensor.h>

#include <atomic>
#include <vector>

#include "model/deepseek_v3.h"
#include "model/mtp_layer.h"

namespace mtpserve {

class Worker {
 public:
  Worker(const DeepSeekV3& target, std::vector<at::Tensor> caches, const MtpLayer* mtp = nullptr,
         at::Tensor mtp_cache = {});

  // Blocks until rank 0 sends shutdown; throws when a collective fails (a peer died or timed out).
  void run();
  int64_t steps() const { return steps_.load(); }

 private:
  const DeepSeekV3& target_;
  std::vector<at::Tensor> caches_;
  const MtpLayer* mtp_;
  at::Tensor mtp_cache_;
  at::Tensor target_hidden_, mtp_hidden_;  // the last forwards' outputs, as on rank 0
  std::atomic<int64_t> steps_{0};
};

}  // namespace mtpserve
