// CPU absorbed MLA: the chosen sequences are padded to one [seqs, query_len x heads] x
// [seqs, context] problem so that every sequence's query rows meet its latent rows in a single
// batched matmul (each KV row is read once for all heads and all MTP query rows).
#include "kernels/cpu/mla_attention_cpu.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>

namespace mtpserve::kernels::cpu {

namespace {

struct PaddedBatch {
  at::Tensor token_rows;  // [seqs * max_q]: query row feeding each padded row
  at::Tensor kv_slots;    // [seqs * max_ctx]: cache row feeding each padded key
  at::Tensor mask;        // [seqs, max_q, 1, max_ctx]: 0 where visible, -inf elsewhere
  at::Tensor valid_rows;  // indices of real (unpadded) query rows in [seqs * max_q]
  int64_t max_q = 0;
  int64_t max_ctx = 0;
};

PaddedBatch pad_batch(const AttentionMetadata& meta, const std::vector<int64_t>& seqs, int64_t block_size) {
  PaddedBatch p;
  for (int64_t s : seqs) {
    p.max_q = std::max(p.max_q, meta.query_len(s));
    p.max_ctx = std::max(p.max_ctx, meta.context_lens[s]);
  }
  const int64_t n = static_cast<int64_t>(seqs.size());
  auto tables = meta.block_tables.to(at::kInt).contiguous();
  const int32_t* table = tables.data_ptr<int32_t>();
  const int64_t table_stride = tables.size(1);

  std::vector<int64_t> token_rows(n * p.max_q), kv_slots(n * p.max_ctx, 0), valid;
  std::vector<float> mask(n * p.max_q * p.max_ctx, -std::numeric_limits<float>::infinity());
  for (int64_t b = 0; b < n; ++b) {
    const int64_t s = seqs[b], q_len = meta.query_len(s), ctx = meta.context_lens[s];
    for (int64_t pos = 0; pos < ctx; ++pos) {
      kv_slots[b * p.max_ctx + pos] = table[s * table_stride + pos / block_size] * block_size + pos % block_size;
    }
    for (int64_t i = 0; i < p.max_q; ++i) {
      // Padded rows repeat the last real row so their softmax stays finite; they are dropped.
      const int64_t row = std::min(i, q_len - 1);
      token_rows[b * p.max_q + i] = meta.query_start[s] + row;
      if (i < q_len) valid.push_back(b * p.max_q + i);
      std::fill_n(mask.begin() + (b * p.max_q + i) * p.max_ctx, ctx - q_len + row + 1, 0.0f);
    }
  }
  auto as_tensor = [](auto& v, at::ScalarType t) { return at::tensor(at::ArrayRef(v), at::TensorOptions(t)); };
  p.token_rows = as_tensor(token_rows, at::kLong);
  p.kv_slots = as_tensor(kv_slots, at::kLong);
  p.valid_rows = as_tensor(valid, at::kLong);
  p.mask = as_tensor(mask, at::kFloat).view({n, p.max_q, 1, p.max_ctx});
  return p;
}

}  // namespace

at::Tensor mla_absorbed_attention(const at::Tensor& q, const at::Tensor& cache, const AttentionMetadata& meta,
                                  const std::vector<int64_t>& seqs, int64_t kv_lora_rank, double scale) {
  const int64_t n = static_cast<int64_t>(seqs.size());
  const int64_t heads = q.size(1), cache_dim = cache.size(2);
  const auto p = pad_batch(meta, seqs, cache.size(1));

  auto keys = cache.view({-1, cache_dim}).index_select(0, p.kv_slots).view({n, p.max_ctx, cache_dim});
  auto queries = q.index_select(0, p.token_rows).view({n, p.max_q * heads, cache_dim});
  auto scores = at::bmm(queries.to(at::kFloat), keys.to(at::kFloat).transpose(1, 2)).mul_(scale);
  scores = scores.view({n, p.max_q, heads, p.max_ctx}).add_(p.mask);
  auto probs = at::softmax(scores, -1).view({n, p.max_q * heads, p.max_ctx});
  auto out = at::bmm(probs, keys.narrow(2, 0, kv_lora_rank).to(at::kFloat));
  return out.view({n * p.max_q, heads, kv_lora_rank}).index_select(0, p.valid_rows).to(q.scalar_type());
}

}  // namespace mtpserve::kernels::cpu
