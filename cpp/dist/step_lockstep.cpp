#include "dist/step_lockstep.h"

#include <ATen/ATen.h>

#include "dist/process_group_communicator.h"

namespace mtpserve {

StepLockstep::StepLockstep(c10::intrusive_ptr<c10d::ProcessGroup> leaders, double timeout_s)
    : leaders_(std::move(leaders)), timeout_(static_cast<int64_t>(timeout_s * 1000)) {}

std::shared_ptr<StepLockstep> StepLockstep::from_group_name(const std::string& name, double timeout_s) {
  return std::shared_ptr<StepLockstep>(new StepLockstep(process_group_named(name), timeout_s));
}

std::vector<int64_t> StepLockstep::agree(const std::vector<int64_t>& mine) const {
  std::vector<at::Tensor> tensors{at::tensor(mine, at::kLong)};
  c10d::AllreduceOptions opts;
  opts.reduceOp = c10d::ReduceOp::MAX;
  opts.timeout = timeout_;
  leaders_->allreduce(tensors, opts)->wait(timeout_);
  const int64_t* p = tensors[0].data_ptr<int64_t>();
  return {p, p + tensors[0].numel()};
}

}  // namespace mtpserve
