#include "model/moe.h"

#include <ATen/ATen.h>


namespace mtpserve {

MoE::MoE(const ModelConfig& c, const Weights& w, const std::string& p, const TensorParallel& tp)
    : routing_{c.n_group, c.topk_group, c.num_experts_per_tok, c.norm_topk_prob, c.routed_scaling_factor} {
  const int64_t h = c.hidden_size, inter = c.moe_intermediate_size, n = c.n_routed_experts;
  gate_ = w.get(p + "gate.weight", {n, h}).to(at::kFloat);
  correction_bias_ = w.get(p + "gate.e_score_correction_bias", {n}).to(at::kFloat);
  const int64_t part = shard_size(inter, tp.size(), "moe_intermediate_size");
  gate_up_ = w.get(stacked_gate_up(p), {n, 2 * part, h});
  down_ = w.get(stacked_down(p), {n, h, part});
  ops_ = &kernels::ops_for(down_.device(), c.batch_invariant);
  if (c.n_shared_experts > 0) shared_.emplace(w, p + "shared_experts.", h, inter * c.n_shared_experts, c.batch_invariant, tp);
}

at::Tensor MoE::operator()(const at::Tensor& x) const {
  auto routing = ops_->route_noaux_tc(ops_->linear(x.to(at::kFloat), gate_), correction_bias_, routing_);
  auto out = ops_->moe_experts(x, gate_up_, down_, routing);
  return shared_ ? out + (*shared_)(x) : out;
}

}  // namespace mtpserve
