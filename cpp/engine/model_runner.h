#pragma once
// Runs the forwards of a step on this rank: the target model, the MTP fill and the recursive MTP
// drafts. It is the one definition of the forward protocol: rank 0's engine calls run() for every
// forward (and run() announces it to the tensor-parallel workers first), and every worker calls
// run() with the plans it receives, so all ranks run the same forwards with the same collectives.
// Hidden states and draft tokens stay on the device between forwards.
#include <ATen/core/Tensor.h>

#include <vector>

#include "dist/step_broadcast.h"
#include "engine/step_input.h"
#include "model/deepseek_v3.h"
#include "model/mtp_layer.h"

namespace mtpserve {

class ModelRunner {
 public:
  // `mtp` and `mtp_cache` may be absent (no speculative decoding).
  ModelRunner(const DeepSeekV3& target, std::vector<at::Tensor> caches, const MtpLayer* mtp = nullptr,
              at::Tensor mtp_cache = {});

  // kTarget: the target model over `input`; returns the logits of input.sample_rows.
  // kMtpFill: the MTP layer over (input's tokens, target hidden states at `rows` of the last target
  //   forward); returns the drafts (argmax) of input.sample_rows, on the device.
  // kMtpDraft: the MTP layer over (the last drafts at `rows`, the MTP layer's last outputs at `rows`);
  //   input's token ids are placeholders. Returns the next drafts like kMtpFill.
  at::Tensor run(StepKind kind, const StepInput& input, const std::vector<int64_t>& rows = {});

  // Logits of `rows` of the last target forward (rank 0 alone: no collective is announced).
  at::Tensor target_logits(const at::Tensor& rows) const { return target_.logits(target_hidden_.index_select(0, rows)); }

  const at::Device& device() const { return device_; }
  bool has_mtp() const { return mtp_ != nullptr; }

 private:
  at::Tensor run_mtp(const StepInput& input, const at::Tensor& tokens, const at::Tensor& previous_hidden);

  const DeepSeekV3& target_;
  std::vector<at::Tensor> caches_;
  const MtpLayer* mtp_;
  at::Tensor mtp_cache_;
  at::Device device_;
  int max_threads_;  // intra-op threads for large steps on the CPU
  at::Tensor target_hidden_;  // [tokens, hidden] of the last target forward
  at::Tensor mtp_hidden_;     // [samples, hidden] of the last MTP forward
  at::Tensor drafts_;         // [samples] argmax tokens of the last MTP forward
};

}  // namespace mtpserve
