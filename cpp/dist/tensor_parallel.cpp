#include "dist/tensor_parallel.h"

#include <ATen/ATen.h>

#include <stdexcept>

#include "dist/process_group_communicator.h"

namespace mtpserve {

TensorParallel TensorParallel::from_group_names(const std::string& data_group, const std::string& control_group,
                                                double timeout_s, const std::string& expert_group) {
  auto data = process_group_named(data_group);
  auto control = process_group_named(control_group);
  if (data->getRank() != control->getRank() || data->getSize() != control->getSize()) {
    throw std::invalid_argument("process groups '" + data_group + "' and '" + control_group +
                                "' do not hold the same ranks");
  }
  TensorParallel tp;
  tp.rank_ = data->getRank();
  tp.size_ = data->getSize();
  if (!expert_group.empty()) {
    auto experts = process_group_named(expert_group);
    tp.ep_rank_ = experts->getRank();
    tp.ep_size_ = experts->getSize();
    tp.expert_comm_ = std::make_shared<ProcessGroupCommunicator>(std::move(experts), timeout_s);
  }
  tp.comm_ = std::make_shared<ProcessGroupCommunicator>(std::move(data), timeout_s);
  tp.control_ = std::make_shared<ProcessGroupControlChannel>(std::move(control), timeout_s);
  return tp;
}

void TensorParallel::all_reduce(at::Tensor& t) const {
  // An empty step (an idle attention group keeping the expert group's lockstep) has the same zero rows on
  // every rank of the group: nothing to sum.
  if (enabled() && t.numel() > 0) comm_->all_reduce(t);
}

at::Tensor TensorParallel::all_gather_last_dim(const at::Tensor& t) const {
  if (!enabled()) return t;
  if (t.numel() == 0) {  // same on every rank (e.g. a step with no sampled rows): nothing to exchange
    auto shape = t.sizes().vec();
    shape.back() *= size_;
    return at::empty(shape, t.options());
  }
  return comm_->all_gather_last_dim(t);
}

void TensorParallel::all_to_all(at::Tensor& out, const at::Tensor& in, const std::vector<int64_t>& out_rows,
                                const std::vector<int64_t>& in_rows) const {
  if (expert_parallel()) {
    expert_comm_->all_to_all(out, in, out_rows, in_rows);
  } else {
    out.copy_(in);
  }
}

ControlChannel& TensorParallel::control() const {
  if (!control_) throw std::logic_error("a single rank has no step-plan channel");
  return *control_;
}

int64_t shard_size(int64_t n, int64_t size, const std::string& what) {
  if (size < 1 || n % size != 0) {
    throw std::invalid_argument("tensor parallel size " + std::to_string(size) + " does not divide " + what + " (" +
                                std::to_string(n) + "); choose --nnodes among its divisors");
  }
  return n / size;
}

}  // namespace mtpserve
