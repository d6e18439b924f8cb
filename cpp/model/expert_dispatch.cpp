#include "model/expert_dispatch.h"

#include <ATen/ATen.h>

#include <numeric>
#include <vector>

namespace mtpserve {

namespace {

enum Slot : size_t { kSentRows, kReceivedRows, kReturnedRows, kSentIds, kReceivedIds };

std::vector<int64_t> to_vector(const at::Tensor& host) {
  const int64_t* p = host.data_ptr<int64_t>();
  return {p, p + host.numel()};
}

}  // namespace

ExpertDispatch::ExpertDispatch(const TensorParallel& tp, int64_t local_experts, const kernels::KernelOps& ops)
    : tp_(tp), local_(local_experts), ops_(&ops) {}

at::Tensor ExpertDispatch::buffer(size_t slot, int64_t rows, int64_t width, const at::TensorOptions& options) const {
  at::Tensor& b = buffers_[slot];
  if (!b.defined() || b.size(0) < rows || b.size(1) != width || b.scalar_type() != options.dtype()) {
    const int64_t capacity = std::max<int64_t>(rows, b.defined() ? 2 * b.size(0) : 1);
    b = at::empty({capacity, width}, options);
  }
  return b.narrow(0, 0, rows);
}

at::Tensor ExpertDispatch::operator()(const at::Tensor& x, const kernels::Routing& routing, const at::Tensor& gate_up,
                                      const at::Tensor& down) const {
  const int64_t tokens = x.size(0), hidden = x.size(1), top_k = routing.experts.size(1);
  // Shares of the attention group's rows (its ranks all hold them); owners are ranks of the expert group.
  const int64_t size = tp_.size(), rank = tp_.rank(), ranks = tp_.ep_size();
  const int64_t first = tokens * rank / size, mine = tokens * (rank + 1) / size - first;
  const auto ids = x.options().dtype(at::kLong);

  // This rank's pairs, in (token, k) order, grouped by owning rank.
  auto experts = routing.experts.narrow(0, first, mine).reshape({-1});
  auto owner = at::floor_divide(experts, local_);
  auto order = at::argsort(owner, /*stable=*/true);
  auto counts = at::empty({2, ranks}, ids);
  counts[0].zero_().scatter_add_(0, owner, at::ones_like(owner));  // a bincount that needs no host sync
  auto received_counts = counts[1];
  tp_.all_to_all(received_counts, counts[0], std::vector<int64_t>(ranks, 1), std::vector<int64_t>(ranks, 1));
  const auto host_counts = counts.cpu();  // the row counts the all-to-alls are sized by
  const auto sent = to_vector(host_counts[0]), received = to_vector(host_counts[1]);
  const int64_t num_sent = experts.numel(), num_received = std::accumulate(received.begin(), received.end(), 0L);

  // Dispatch: rows and local expert ids to their owners.
  auto sent_rows = buffer(kSentRows, num_sent, hidden, x.options());
  at::index_select_out(sent_rows, x.narrow(0, first, mine), 0, at::floor_divide(order, top_k));
  auto sent_ids = buffer(kSentIds, num_sent, 1, ids);
  at::index_select_out(sent_ids, (experts - owner * local_).unsqueeze(1), 0, order);
  auto received_rows = buffer(kReceivedRows, num_received, hidden, x.options());
  auto received_ids = buffer(kReceivedIds, num_received, 1, ids);
  tp_.all_to_all(received_rows, sent_rows, received, sent);
  tp_.all_to_all(received_ids, sent_ids, received, sent);

  // Each received pair through its expert, unweighted (weight 1 is exact): the sender weights them.
  auto outputs = num_received == 0
                     ? at::empty({0, hidden}, x.options())
                     : ops_->moe_experts(received_rows, gate_up, down,
                                         {at::ones({num_received, 1}, x.options().dtype(at::kFloat)), received_ids});
  auto returned = buffer(kReturnedRows, num_sent, hidden, x.options());
  tp_.all_to_all(returned, outputs, sent, received);

  // Combine: back in (token, k) order, weighted and summed over k as one rank sums them.
  auto pairs = at::empty_like(returned).index_copy_(0, order, returned);
  auto weights = routing.weights.narrow(0, first, mine).reshape({-1, 1});
  auto share = (pairs.to(at::kFloat) * weights).view({mine, top_k, hidden}).sum(1).to(x.scalar_type());
  auto out = at::zeros_like(x);
  out.narrow(0, first, mine).copy_(share);
  return out;
}

}  // namespace mtpserve
