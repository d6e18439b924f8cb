#pragma once
// A tensor-parallel worker (ranks 1..N-1): no scheduler and no sampling; it replays the forwards
// rank 0's engine announces (dist/step_broadcast.h) through its own ModelRunner, with this rank's
// shards, so that every collective inside them meets its peers, until rank 0 sends shutdown.
#include <ATen/core/Tensor.h>

#include <atomic>
#include <vector>

#include "engine/model_runner.h"

namespace mtpserve {

class Worker {
 public:
  Worker(const DeepSeekV3& target, std::vector<at::Tensor> caches, const MtpLayer* mtp = nullptr,
         at::Tensor mtp_cache = {});

  // Blocks until rank 0 sends shutdown; throws when a collective fails (a peer died or timed out).
  void run();
  int64_t steps() const { return steps_.load(); }

 private:
  const TensorParallel& tp_;
  ModelRunner runner_;
  std::atomic<int64_t> steps_{0};
};

}  // namespace mtpserve
