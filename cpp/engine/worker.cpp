#include "engine/worker.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <stdexcept>

#include "dist/step_broadcast.h"
#include "engine/step_input.h"

namespace mtpserve {

Worker::Worker(const DeepSeekV3& target, std::vector<at::Tensor> caches, const MtpLayer* mtp, at::Tensor mtp_cache)
    : target_(target), caches_(std::move(caches)), mtp_(mtp), mtp_cache_(std::move(mtp_cache)) {
  if (!target.tp().enabled() || target.tp().rank() == 0) {
    throw std::invalid_argument("a Worker runs on tensor-parallel ranks 1..N-1; rank 0 runs the Engine");
  }
}

void Worker::run() {
  const TensorParallel& tp = target_.tp();
  const at::Device device = target_.embedding().device();
  const int max_threads = at::get_num_threads();
  while (true) {
    StepMessage m = receive_step(tp);
    if (m.kind == StepKind::kShutdown) return;
    StepInput input = step_input_from_wire(m.wire, device);
    if (m.kind == StepKind::kTarget) {
      // The engine's rule, kept through the step's MTP forwards: small steps on one intra-op thread.
      at::set_num_threads(input.token_ids.size(0) >= 512 ? max_threads : 1);
      target_hidden_ = target_.forward(input.token_ids, input.positions, caches_, input.attention);
      target_.logits(target_hidden_.index_select(0, input.sample_rows));
    } else if (m.kind == StepKind::kMtpFill || m.kind == StepKind::kMtpDraft) {
      if (mtp_ == nullptr) throw std::runtime_error("rank 0 drafts with MTP but this worker has no MTP layer");
      const at::Tensor& source = m.kind == StepKind::kMtpFill ? target_hidden_ : mtp_hidden_;
      auto previous = source.index_select(0, at::tensor(m.rows, at::kLong).to(device));
      mtp_hidden_ = mtp_->forward(input.token_ids, previous, input.positions, target_.rope(), mtp_cache_,
                                  input.attention)
                        .index_select(0, input.sample_rows);
      mtp_->logits(mtp_hidden_);
    } else {
      throw std::runtime_error("unknown step kind " + std::to_string(static_cast<int64_t>(m.kind)));
    }
    steps_ += 1;
  }
}

}  // namespace mtpserve
