#include "engine/worker.h"

#include <c10/core/DeviceGuard.h>

#include <stdexcept>

namespace mtpserve {

Worker::Worker(const DeepSeekV3& target, std::vector<at::Tensor> caches, const MtpLayer* mtp, at::Tensor mtp_cache)
    : tp_(target.tp()), runner_(target, std::move(caches), mtp, std::move(mtp_cache)) {
  if (!tp_.enabled() || tp_.rank() == 0) {
    throw std::invalid_argument("a Worker runs on tensor-parallel ranks 1..N-1; rank 0 runs the Engine");
  }
}

void Worker::run() {
  // The caller's thread may have another GPU current; work that follows the current device (host buffers
  // pinned for uploads, streams) must find this rank's own.
  const c10::DeviceGuard device(runner_.device());
  while (true) {
    StepMessage m = receive_step(tp_);
    if (m.kind == StepKind::kShutdown) {
      runner_.release_graphs();
      return;
    }
    runner_.run_announced(m);
    steps_ += 1;
  }
}

}  // namespace mtpserve
