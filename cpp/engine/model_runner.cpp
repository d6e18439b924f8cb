#include "engine/model_runner.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <stdexcept>

namespace mtpserve {

namespace {

// Steps with fewer tokens than this run on one intra-op thread: measured on the 2-core CI
// machine, a fork/join across cores made decode and verify steps of up to 96 tokens slower.
constexpr int64_t kMinTokensForThreads = 512;

}  // namespace

ModelRunner::ModelRunner(const DeepSeekV3& target, std::vector<at::Tensor> caches, const MtpLayer* mtp,
                         at::Tensor mtp_cache)
    : target_(target),
      caches_(std::move(caches)),
      mtp_(mtp),
      mtp_cache_(std::move(mtp_cache)),
      device_(target.embedding().device()),
      max_threads_(at::get_num_threads()) {
  if (mtp_ != nullptr && !mtp_cache_.defined()) throw std::invalid_argument("an MTP layer needs its latent cache");
}

at::Tensor ModelRunner::run(StepKind kind, const StepInput& input, const std::vector<int64_t>& rows) {
  const TensorParallel& tp = target_.tp();
  if (tp.enabled() && tp.rank() == 0) send_step(tp, kind, input.wire, rows);
  if (kind == StepKind::kTarget) {
    // The thread count chosen for the target forward holds through the step's MTP forwards.
    at::set_num_threads(input.token_ids.size(0) >= kMinTokensForThreads ? max_threads_ : 1);
    target_hidden_ = target_.forward(input.token_ids, input.positions, caches_, input.attention);
    return target_.logits(target_hidden_.index_select(0, input.sample_rows));
  }
  if (mtp_ == nullptr) throw std::runtime_error("rank 0 drafts with MTP but this rank has no MTP layer");
  auto selected = at::tensor(rows, at::kLong).to(device_);
  if (kind == StepKind::kMtpFill) return run_mtp(input, input.token_ids, target_hidden_.index_select(0, selected));
  if (kind == StepKind::kMtpDraft) {
    return run_mtp(input, drafts_.index_select(0, selected), mtp_hidden_.index_select(0, selected));
  }
  throw std::runtime_error("unknown step kind " + std::to_string(static_cast<int64_t>(kind)));
}

at::Tensor ModelRunner::run_mtp(const StepInput& input, const at::Tensor& tokens, const at::Tensor& previous_hidden) {
  mtp_hidden_ = mtp_->forward(tokens, previous_hidden, input.positions, target_.rope(), mtp_cache_, input.attention)
                    .index_select(0, input.sample_rows);
  drafts_ = mtp_->logits(mtp_hidden_).argmax(-1);
  return drafts_;
}

}  // namespace mtpserve
