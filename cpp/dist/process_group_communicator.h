#pragma once
// Communicator and ControlChannel over c10d process groups (looked up by name in c10d's registry, where
// torch.distributed registers every group it creates).
//
// How a collective is waited for depends on where its tensors live:
// - device tensors (NCCL): stream-ordered. Work::wait() without a timeout only makes the current stream
//   wait for the collective's stream; the host goes on issuing kernels. (With a timeout, NCCL's wait()
//   blocks the host until the collective has finished, which would stall the host after every layer.)
//   A peer that hangs is bounded by the process group's own timeout, which its watchdog enforces.
// - host tensors (gloo): the host waits, at most timeout_s, so that a hung peer fails the step.
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <chrono>
#include <memory>
#include <string>

#include "dist/communicator.h"
#include "dist/control_channel.h"

namespace mtpserve {

// The group registered under `name`; throws std::invalid_argument naming it when there is none.
c10::intrusive_ptr<c10d::ProcessGroup> process_group_named(const std::string& name);

class ProcessGroupCommunicator final : public Communicator {
 public:
  ProcessGroupCommunicator(c10::intrusive_ptr<c10d::ProcessGroup> group, double timeout_s);

  void all_reduce(at::Tensor& t) override;
  at::Tensor all_gather_last_dim(const at::Tensor& t) override;
  void all_to_all(at::Tensor& out, const at::Tensor& in, const std::vector<int64_t>& out_rows,
                  const std::vector<int64_t>& in_rows) override;

 private:
  void finish(const c10::intrusive_ptr<c10d::Work>& work, const at::Tensor& t) const;

  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  std::chrono::milliseconds timeout_;
};

class ProcessGroupControlChannel final : public ControlChannel {
 public:
  ProcessGroupControlChannel(c10::intrusive_ptr<c10d::ProcessGroup> group, double timeout_s);

  void broadcast(at::Tensor& t, bool unbounded) override;

 private:
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  std::chrono::milliseconds timeout_;
};

}  // namespace mtpserve
