#include "model/mla.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

#include "kernels/attention.h"

namespace mtpserve {

namespace {
// Query chunks up to this length use the absorbed form (decode and MTP verify), longer ones the
// expanded prefill form, whose per-head keys pay off only over many query rows.
constexpr int64_t kMaxAbsorbedQueryLen = 16;
}  // namespace

MultiHeadLatentAttention::MultiHeadLatentAttention(const ModelConfig& c, const Weights& w, const std::string& p,
                                                   const TensorParallel& tp)
    : heads_(shard_size(c.num_attention_heads, tp.size(), "num_attention_heads")),
      nope_dim_(c.qk_nope_head_dim),
      rope_dim_(c.qk_rope_head_dim),
      v_dim_(c.v_head_dim),
      kv_lora_rank_(c.kv_lora_rank),
      kv_a_layernorm_(w.get(p + "kv_a_layernorm.weight", {c.kv_lora_rank}), c.rms_norm_eps) {
  const int64_t h = c.hidden_size, qk = c.qk_head_dim(), all_heads = c.num_attention_heads;
  const int64_t rank = tp.rank(), size = tp.size();
  if (c.q_lora_rank > 0) {
    q_a_proj_ = w.get(p + "q_a_proj.weight", {c.q_lora_rank, h});
    q_a_layernorm_.emplace(w.get(p + "q_a_layernorm.weight", {c.q_lora_rank}), c.rms_norm_eps);
    q_b_proj_ = w.get_shard(p + "q_b_proj.weight", {all_heads * qk, c.q_lora_rank}, 0, rank, size);
  } else {
    q_proj_ = w.get_shard(p + "q_proj.weight", {all_heads * qk, h}, 0, rank, size);
  }
  kv_a_proj_ = w.get(p + "kv_a_proj_with_mqa.weight", {kv_lora_rank_ + rope_dim_, h});
  kv_b_proj_ = w.get_shard(p + "kv_b_proj.weight", {all_heads * (nope_dim_ + v_dim_), kv_lora_rank_}, 0, rank, size);
  o_proj_ = w.get_shard(p + "o_proj.weight", {h, all_heads * v_dim_}, 1, rank, size);
  auto kv_b = kv_b_proj_.view({heads_, nope_dim_ + v_dim_, kv_lora_rank_});
  w_uk_ = kv_b.narrow(1, 0, nope_dim_).contiguous();
  w_uv_t_ = kv_b.narrow(1, nope_dim_, v_dim_).transpose(1, 2).contiguous();
  scale_ = std::pow(static_cast<double>(qk), -0.5) * RotaryEmbedding(c).softmax_scale_factor();
}

at::Tensor MultiHeadLatentAttention::project_queries(const at::Tensor& x) const {
  auto q = q_proj_ ? at::linear(x, *q_proj_) : at::linear((*q_a_layernorm_)(at::linear(x, *q_a_proj_)), *q_b_proj_);
  return q.view({x.size(0), heads_, nope_dim_ + rope_dim_});
}

at::Tensor MultiHeadLatentAttention::operator()(const at::Tensor& x, const at::Tensor& positions,
                                                const RotaryEmbedding& rope, const at::Tensor& cache,
                                                const kernels::AttentionMetadata& meta) const {
  auto q = project_queries(x);
  q = at::cat({q.narrow(2, 0, nope_dim_), rope(q.narrow(2, nope_dim_, rope_dim_), positions)}, -1);
  auto kv = at::linear(x, kv_a_proj_);
  auto latent = at::cat({kv_a_layernorm_(kv.narrow(1, 0, kv_lora_rank_)), rope(kv.narrow(1, kv_lora_rank_, rope_dim_), positions)}, -1);
  kernels::write_latent_cache(cache, latent, meta.slot_mapping);

  auto out = at::empty({x.size(0), heads_, v_dim_}, x.options());
  std::vector<int64_t> absorbed;
  for (int64_t s = 0; s < meta.num_seqs(); ++s) {
    if (meta.query_len(s) > kMaxAbsorbedQueryLen) {
      out.narrow(0, meta.query_start[s], meta.query_len(s)).copy_(prefill_form(q, cache, meta, s));
    } else {
      absorbed.push_back(s);
    }
  }
  if (!absorbed.empty()) {
    std::vector<int64_t> rows;
    for (int64_t s : absorbed) {
      for (int64_t r = meta.query_start[s]; r < meta.query_start[s + 1]; ++r) rows.push_back(r);
    }
    out.index_copy_(0, at::tensor(at::ArrayRef(rows), at::kLong).to(x.device()), absorbed_form(q, cache, meta, absorbed));
  }
  return at::linear(out.view({x.size(0), heads_ * v_dim_}), o_proj_);
}

at::Tensor MultiHeadLatentAttention::prefill_form(const at::Tensor& q, const at::Tensor& cache,
                                                  const kernels::AttentionMetadata& meta, int64_t seq) const {
  const int64_t q_len = meta.query_len(seq), ctx = meta.context_lens[seq];
  auto rows = kernels::gather_latent(cache, meta, seq, ctx).to(q.scalar_type());
  auto kv = at::linear(rows.narrow(1, 0, kv_lora_rank_), kv_b_proj_).view({ctx, heads_, nope_dim_ + v_dim_});
  auto k_rope = rows.narrow(1, kv_lora_rank_, rope_dim_).unsqueeze(1).expand({ctx, heads_, rope_dim_});
  auto keys = at::cat({kv.narrow(2, 0, nope_dim_), k_rope}, -1).transpose(0, 1);        // [h, ctx, qk]
  auto values = kv.narrow(2, nope_dim_, v_dim_).transpose(0, 1);                          // [h, ctx, v]
  auto queries = q.narrow(0, meta.query_start[seq], q_len).transpose(0, 1);               // [h, q, qk]
  auto scores = at::matmul(queries, keys.transpose(1, 2)).to(at::kFloat) * scale_;
  // Query row i sits at position ctx - q_len + i and sees keys up to it.
  auto key_pos = at::arange(ctx, scores.options().dtype(at::kLong));
  auto query_pos = at::arange(ctx - q_len, ctx, scores.options().dtype(at::kLong)).unsqueeze(1);
  scores.masked_fill_(key_pos.unsqueeze(0) > query_pos, -std::numeric_limits<float>::infinity());
  auto probs = at::softmax(scores, -1).to(q.scalar_type());
  return at::matmul(probs, values).transpose(0, 1);                                       // [q, h, v]
}

at::Tensor MultiHeadLatentAttention::absorbed_form(const at::Tensor& q, const at::Tensor& cache,
                                                   const kernels::AttentionMetadata& meta,
                                                   const std::vector<int64_t>& seqs) const {
  auto q_nope = q.narrow(2, 0, nope_dim_).transpose(0, 1);                                // [h, t, nope]
  auto q_latent = at::bmm(q_nope, w_uk_).transpose(0, 1);                                 // [t, h, lora]
  auto q_absorbed = at::cat({q_latent, q.narrow(2, nope_dim_, rope_dim_)}, -1);
  auto o_latent = kernels::mla_absorbed_attention(q_absorbed, cache, meta, seqs, kv_lora_rank_, scale_);
  return at::bmm(o_latent.transpose(0, 1), w_uv_t_).transpose(0, 1);                     // [t', h, v]
}

}  // namespace mtpserve
