#include "model/mla.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "kernels/latent_kv.h"

namespace mtpserve {

at::Tensor output_rows(const at::Tensor& t, const OutputRows* out) { return out ? t.index_select(0, out->rows) : t; }

MultiHeadLatentAttention::MultiHeadLatentAttention(const ModelConfig& c, const Weights& w, const std::string& p,
                                                   const TensorParallel& tp)
    : heads_(shard_size(c.num_attention_heads, tp.size(), "num_attention_heads")),
      q_lora_rank_(std::max<int64_t>(c.q_lora_rank, 0)),
      nope_dim_(c.qk_nope_head_dim),
      rope_dim_(c.qk_rope_head_dim),
      v_dim_(c.v_head_dim),
      kv_lora_rank_(c.kv_lora_rank),
      kv_a_layernorm_(w.get(p + "kv_a_layernorm.weight", {c.kv_lora_rank}), c.rms_norm_eps, c.batch_invariant) {
  const int64_t h = c.hidden_size, qk = c.qk_head_dim(), all_heads = c.num_attention_heads;
  const int64_t rank = tp.rank(), size = tp.size();
  auto kv_a_proj = w.get(p + "kv_a_proj_with_mqa.weight", {kv_lora_rank_ + rope_dim_, h});
  if (q_lora_rank_ > 0) {
    down_proj_ = at::cat({w.get(p + "q_a_proj.weight", {c.q_lora_rank, h}), kv_a_proj});
    q_a_layernorm_.emplace(w.get(p + "q_a_layernorm.weight", {c.q_lora_rank}), c.rms_norm_eps, c.batch_invariant);
    q_b_proj_ = w.get_shard(p + "q_b_proj.weight", {all_heads * qk, c.q_lora_rank}, rank, size);
  } else {
    q_proj_ = w.get_shard(p + "q_proj.weight", {all_heads * qk, h}, rank, size);
    down_proj_ = kv_a_proj;
  }
  auto kv_b_proj =
      w.get_shard(p + "kv_b_proj.weight", {all_heads * (nope_dim_ + v_dim_), kv_lora_rank_}, rank, size);
  o_proj_ = w.get_shard(p + "o_proj.weight", {h, all_heads * v_dim_}, rank, size);
  auto kv_b = kv_b_proj.view({heads_, nope_dim_ + v_dim_, kv_lora_rank_});
  w_uk_ = kv_b.narrow(1, 0, nope_dim_).contiguous();
  w_uv_t_ = kv_b.narrow(1, nope_dim_, v_dim_).transpose(1, 2).contiguous();
  ops_ = &kernels::ops_for(o_proj_.device(), c.batch_invariant);
  scale_ = std::pow(static_cast<double>(qk), -0.5) * RotaryEmbedding(c).softmax_scale_factor();
}

at::Tensor MultiHeadLatentAttention::project_queries(const at::Tensor& x, const at::Tensor& down,
                                                     const OutputRows* out) const {
  auto q = q_proj_ ? ops_->linear(output_rows(x, out), *q_proj_)
                   : ops_->linear((*q_a_layernorm_)(output_rows(down.narrow(1, 0, q_lora_rank_), out)), *q_b_proj_);
  return q.view({q.size(0), heads_, nope_dim_ + rope_dim_});
}

at::Tensor MultiHeadLatentAttention::operator()(const at::Tensor& x, const at::Tensor& positions,
                                                const RotaryEmbedding& rope, const at::Tensor& cache,
                                                const kernels::AttentionMetadata& meta, const OutputRows* out) const {
  auto down = ops_->linear(x, down_proj_);
  auto kv = down.narrow(1, q_lora_rank_, kv_lora_rank_ + rope_dim_);
  kernels::write_latent_kv(*ops_, cache, kv, kv_lora_rank_, kv_a_layernorm_.weight(), kv_a_layernorm_.eps(), positions,
                           rope.cos(), rope.sin(), meta.slot_mapping);

  const auto query_positions = output_rows(positions, out);
  auto q = project_queries(x, down, out);
  auto q_latent = ops_->head_matmul(q.narrow(2, 0, nope_dim_), w_uk_);  // [t, h, lora]
  auto q_absorbed = at::cat({q_latent, rope(q.narrow(2, nope_dim_, rope_dim_), query_positions)}, -1);
  auto o_latent = ops_->mla_attention(q_absorbed, cache, out ? *out->attention : meta, kv_lora_rank_, scale_);
  auto o = ops_->head_matmul(o_latent, w_uv_t_);                         // [t, h, v]
  return ops_->linear(o.reshape({q.size(0), heads_ * v_dim_}), o_proj_);
}

}  // namespace mtpserve
