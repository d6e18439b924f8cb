#include "model/moe.h"

#include <ATen/ATen.h>

#include <stdexcept>

namespace mtpserve {

namespace {

int64_t experts_per_rank(int64_t experts, int64_t ranks) {
  if (experts % ranks != 0) {
    throw std::invalid_argument("--ep_size=" + std::to_string(ranks) + " does not divide n_routed_experts (" +
                                std::to_string(experts) + "); choose an expert-parallel size among its divisors");
  }
  return experts / ranks;
}

}  // namespace

MoE::MoE(const ModelConfig& c, const Weights& w, const std::string& p, const TensorParallel& tp)
    : routing_{c.n_group, c.topk_group, c.num_experts_per_tok, c.norm_topk_prob, c.routed_scaling_factor} {
  const int64_t h = c.hidden_size, inter = c.moe_intermediate_size, n = c.n_routed_experts;
  gate_ = w.get(p + "gate.weight", {n, h}).to(at::kFloat);
  correction_bias_ = w.get(p + "gate.e_score_correction_bias", {n}).to(at::kFloat);
  const int64_t experts = tp.expert_parallel() ? experts_per_rank(n, tp.ep_size()) : n;
  const int64_t part = tp.expert_parallel() ? inter : shard_size(inter, tp.size(), "moe_intermediate_size");
  gate_up_ = w.get(stacked_gate_up(p), {experts, 2 * part, h});
  down_ = w.get(stacked_down(p), {experts, h, part});
  ops_ = &kernels::ops_for(down_.device(), c.batch_invariant);
  if (tp.expert_parallel()) dispatch_.emplace(tp, experts, *ops_);
  if (c.n_shared_experts > 0) {
    shared_.emplace(w, p + "shared_experts.", h, inter * c.n_shared_experts, c.batch_invariant, tp);
  }
}

at::Tensor MoE::operator()(const at::Tensor& x) const {
  auto routing = ops_->route_noaux_tc(ops_->linear(x.to(at::kFloat), gate_), correction_bias_, routing_);
  auto out = dispatch_ ? (*dispatch_)(x, routing, gate_up_, down_) : ops_->moe_experts(x, gate_up_, down_, routing);
  return shared_ ? out + (*shared_)(x) : out;
}

}  // namespace mtpserve
