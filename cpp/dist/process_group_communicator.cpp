#include "dist/process_group_communicator.h"

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/GroupRegistry.hpp>

#include <stdexcept>

namespace mtpserve {

namespace {

std::chrono::milliseconds milliseconds(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

}  // namespace

c10::intrusive_ptr<c10d::ProcessGroup> process_group_named(const std::string& name) {
  auto group = c10d::resolve_process_group(name);
  if (!group) throw std::invalid_argument("no c10d process group named '" + name + "'");
  return group;
}

ProcessGroupCommunicator::ProcessGroupCommunicator(c10::intrusive_ptr<c10d::ProcessGroup> group, double timeout_s)
    : group_(std::move(group)), timeout_(milliseconds(timeout_s)) {}

void ProcessGroupCommunicator::finish(const c10::intrusive_ptr<c10d::Work>& work, const at::Tensor& t) const {
  if (t.is_cpu()) {
    work->wait(timeout_);
  } else {
    work->wait();  // stream-ordered: see the header
  }
}

void ProcessGroupCommunicator::all_reduce(at::Tensor& t) {
  std::vector<at::Tensor> tensors{t};
  c10d::AllreduceOptions opts;
  opts.timeout = timeout_;
  finish(group_->allreduce(tensors, opts), t);
}

at::Tensor ProcessGroupCommunicator::all_gather_last_dim(const at::Tensor& t) {
  std::vector<at::Tensor> input{t.contiguous()};
  std::vector<std::vector<at::Tensor>> output(1);
  for (int64_t r = 0; r < group_->getSize(); ++r) output[0].push_back(at::empty_like(input[0]));
  c10d::AllgatherOptions opts;
  opts.timeout = timeout_;
  finish(group_->allgather(output, input, opts), t);
  return at::cat(output[0], -1);
}

void ProcessGroupCommunicator::all_to_all(at::Tensor& out, const at::Tensor& in, const std::vector<int64_t>& out_rows,
                                          const std::vector<int64_t>& in_rows) {
  at::Tensor input = in;  // c10d takes non-const references
  std::vector<int64_t> out_splits = out_rows, in_splits = in_rows;
  c10d::AllToAllOptions opts;
  opts.timeout = timeout_;
  finish(group_->alltoall_base(out, input, out_splits, in_splits, opts), in);
}

ProcessGroupControlChannel::ProcessGroupControlChannel(c10::intrusive_ptr<c10d::ProcessGroup> group, double timeout_s)
    : group_(std::move(group)), timeout_(milliseconds(timeout_s)) {}

void ProcessGroupControlChannel::broadcast(at::Tensor& t, bool unbounded) {
  if (!t.is_cpu()) throw std::logic_error("step plans travel as host tensors");
  std::vector<at::Tensor> tensors{t};
  c10d::BroadcastOptions opts;
  opts.rootRank = 0;
  // About a year: effectively no timeout, and far from overflowing a steady_clock deadline.
  opts.timeout = unbounded ? std::chrono::milliseconds(int64_t{365} * 24 * 3600 * 1000) : timeout_;
  group_->broadcast(tensors, opts)->wait(opts.timeout);
}

}  // namespace mtpserve
