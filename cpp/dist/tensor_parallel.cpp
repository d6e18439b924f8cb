#include "dist/tensor_parallel.h"

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/GroupRegistry.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <chrono>
#include <stdexcept>

namespace mtpserve {

class Communicator {
 public:
  Communicator(c10::intrusive_ptr<c10d::ProcessGroup> group, double timeout_s)
      : group_(std::move(group)),
        timeout_(std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000))) {}

  void all_reduce(at::Tensor& t) {
    std::vector<at::Tensor> tensors{t};
    c10d::AllreduceOptions opts;
    opts.timeout = timeout_;
    group_->allreduce(tensors, opts)->wait(timeout_);
  }

  at::Tensor all_gather(const at::Tensor& t, int64_t size) {
    std::vector<at::Tensor> input{t.contiguous()};
    std::vector<std::vector<at::Tensor>> output(1);
    for (int64_t r = 0; r < size; ++r) output[0].push_back(at::empty_like(input[0]));
    c10d::AllgatherOptions opts;
    opts.timeout = timeout_;
    group_->allgather(output, input, opts)->wait(timeout_);
    return at::cat(output[0], -1);
  }

  void broadcast(at::Tensor& t, bool unbounded) {
    std::vector<at::Tensor> tensors{t};
    c10d::BroadcastOptions opts;
    opts.rootRank = 0;
    // About a year: effectively no timeout, and far from overflowing a steady_clock deadline.
    opts.timeout = unbounded ? std::chrono::milliseconds(int64_t{365} * 24 * 3600 * 1000) : timeout_;
    group_->broadcast(tensors, opts)->wait(opts.timeout);
  }

  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  std::chrono::milliseconds timeout_;
};

TensorParallel TensorParallel::from_group_name(const std::string& group_name, double timeout_s) {
  auto group = c10d::resolve_process_group(group_name);
  if (!group) throw std::invalid_argument("no c10d process group named '" + group_name + "'");
  TensorParallel tp;
  tp.rank_ = group->getRank();
  tp.size_ = group->getSize();
  tp.comm_ = std::make_shared<Communicator>(std::move(group), timeout_s);
  return tp;
}

void TensorParallel::all_reduce(at::Tensor& t) const {
  if (enabled()) comm_->all_reduce(t);
}

at::Tensor TensorParallel::all_gather_last_dim(const at::Tensor& t) const {
  if (!enabled()) return t;
  if (t.numel() == 0) {  // same on every rank (e.g. a step with no sampled rows): nothing to exchange
    auto shape = t.sizes().vec();
    shape.back() *= size_;
    return at::empty(shape, t.options());
  }
  return comm_->all_gather(t, size_);
}

void TensorParallel::broadcast(at::Tensor& t, bool unbounded) const {
  if (enabled()) comm_->broadcast(t, unbounded);
}

int64_t shard_size(int64_t n, int64_t size, const std::string& what) {
  if (size < 1 || n % size != 0) {
    throw std::invalid_argument("tensor parallel size " + std::to_string(size) + " does not divide " + what + " (" +
                                std::to_string(n) + "); choose --nnodes among its divisors");
  }
  return n / size;
}

}  // namespace mtpserve
