#pragma once
// Data-parallel attention with expert parallelism: every rank of the world takes part in every MoE
// layer's all-to-all, so the attention groups, each with its own scheduler, must run the same forwards.
// Their leaders (the rank of each group that runs its Engine) agree on a few numbers over a gloo group of
// leaders: before a step whether anyone steps (an idle group then runs an empty one) and before drafting
// how many MTP forwards to run (fewer are padded with empty ones). Nothing else crosses groups.
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mtpserve {

class StepLockstep {
 public:
  // The leaders' group registered under `name` in c10d's registry; a peer may hang at most timeout_s.
  static std::shared_ptr<StepLockstep> from_group_name(const std::string& name, double timeout_s);

  int64_t group() const { return leaders_->getRank(); }
  int64_t groups() const { return leaders_->getSize(); }
  // The elementwise maximum of every leader's `mine` (all the same length).
  std::vector<int64_t> agree(const std::vector<int64_t>& mine) const;

 private:
  StepLockstep(c10::intrusive_ptr<c10d::ProcessGroup> leaders, double timeout_s);

  c10::intrusive_ptr<c10d::ProcessGroup> leaders_;
  std::chrono::milliseconds timeout_;
};

}  // namespace mtpserve
