// CPU absorbed MLA. Short queries (decode, MTP verify) of one length are padded to one [seqs,
// query_len x heads] x [seqs, context] problem so that every sequence's query rows meet its latent
// rows in a single batched matmul (each KV row is read once for all heads and all MTP query rows).
// Each query length is its own problem: a sequence whose drafts the adaptive policy trimmed would
// otherwise pay the step's longest query in attention, which is most of what trimming saves on a CPU
// (at 16 sequences, 12 of 4 rows and 4 of 1 took 2.05 ms a layer padded, 1.58 ms as two problems).
// Each long query (a prefill chunk) is its own problem, so one long prompt does not pad every decode
// to its length.
#include "kernels/cpu/attention_cpu.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>
#include <vector>

namespace mtpserve::kernels::cpu {

namespace {

// Query chunks up to this length are batched with the others of their length.
constexpr int64_t kMaxBatchedQueryLen = 16;

struct StepView {
  const int32_t* query_start;
  const int32_t* context_lens;
  const int32_t* tables;
  int64_t table_stride;

  int64_t query_len(int64_t s) const { return query_start[s + 1] - query_start[s]; }
};

struct PaddedBatch {
  at::Tensor token_rows;  // [seqs * max_q]: query row feeding each padded row
  at::Tensor kv_slots;    // [seqs * max_ctx]: cache row feeding each padded key
  at::Tensor mask;        // [seqs, max_q, 1, max_ctx]: 0 where visible, -inf elsewhere
  at::Tensor valid_rows;  // indices of real (unpadded) query rows in [seqs * max_q]
  std::vector<int64_t> out_rows;  // the token row of each valid row
  int64_t max_q = 0;
  int64_t max_ctx = 0;
};

PaddedBatch pad_batch(const StepView& v, const std::vector<int64_t>& seqs, int64_t block_size) {
  PaddedBatch p;
  for (int64_t s : seqs) {
    p.max_q = std::max(p.max_q, v.query_len(s));
    p.max_ctx = std::max<int64_t>(p.max_ctx, v.context_lens[s]);
  }
  const int64_t n = static_cast<int64_t>(seqs.size());
  std::vector<int64_t> token_rows(n * p.max_q), kv_slots(n * p.max_ctx, 0), valid;
  std::vector<float> mask(n * p.max_q * p.max_ctx, -std::numeric_limits<float>::infinity());
  for (int64_t b = 0; b < n; ++b) {
    const int64_t s = seqs[b], q_len = v.query_len(s), ctx = v.context_lens[s];
    const int32_t* table = v.tables + s * v.table_stride;
    for (int64_t pos = 0; pos < ctx; ++pos) {
      kv_slots[b * p.max_ctx + pos] = int64_t{table[pos / block_size]} * block_size + pos % block_size;
    }
    for (int64_t i = 0; i < p.max_q; ++i) {
      // Padded rows repeat the last real row so their softmax stays finite; they are dropped.
      const int64_t row = std::min(i, q_len - 1);
      token_rows[b * p.max_q + i] = v.query_start[s] + row;
      if (i < q_len) {
        valid.push_back(b * p.max_q + i);
        p.out_rows.push_back(v.query_start[s] + i);
      }
      std::fill_n(mask.begin() + (b * p.max_q + i) * p.max_ctx, ctx - q_len + row + 1, 0.0f);
    }
  }
  auto as_tensor = [](auto& vec, at::ScalarType t) { return at::tensor(at::ArrayRef(vec), at::TensorOptions(t)); };
  p.token_rows = as_tensor(token_rows, at::kLong);
  p.kv_slots = as_tensor(kv_slots, at::kLong);
  p.valid_rows = as_tensor(valid, at::kLong);
  p.mask = as_tensor(mask, at::kFloat).view({n, p.max_q, 1, p.max_ctx});
  return p;
}

// Attention of the sequences `seqs` as one padded problem, written into out's rows.
void attend(const at::Tensor& q, const at::Tensor& cache, const StepView& v, const std::vector<int64_t>& seqs,
            int64_t kv_lora_rank, double scale, at::Tensor& out) {
  const int64_t n = static_cast<int64_t>(seqs.size());
  const int64_t heads = q.size(1), cache_dim = cache.size(2);
  const auto p = pad_batch(v, seqs, cache.size(1));
  auto keys = cache.view({-1, cache_dim}).index_select(0, p.kv_slots).view({n, p.max_ctx, cache_dim});
  auto queries = q.index_select(0, p.token_rows).view({n, p.max_q * heads, cache_dim});
  auto scores = at::bmm(queries.to(at::kFloat), keys.to(at::kFloat).transpose(1, 2)).mul_(scale);
  scores = scores.view({n, p.max_q, heads, p.max_ctx}).add_(p.mask);
  auto probs = at::softmax(scores, -1).view({n, p.max_q * heads, p.max_ctx});
  auto result = at::bmm(probs, keys.narrow(2, 0, kv_lora_rank).to(at::kFloat));
  result = result.view({n * p.max_q, heads, kv_lora_rank}).index_select(0, p.valid_rows);
  out.index_copy_(0, at::tensor(p.out_rows, at::kLong), result.to(out.scalar_type()));
}

}  // namespace

void write_latent_cache(const at::Tensor& cache, const at::Tensor& rows, const at::Tensor& slot_mapping) {
  auto keep = slot_mapping >= 0;
  auto flat = cache.view({-1, cache.size(2)});
  if (keep.all().item<bool>()) {
    flat.index_copy_(0, slot_mapping, rows.to(cache.scalar_type()));
  } else {
    flat.index_copy_(0, slot_mapping.masked_select(keep), rows.index({keep}).to(cache.scalar_type()));
  }
}

at::Tensor mla_attention(const at::Tensor& q, const at::Tensor& cache, const AttentionMetadata& meta,
                         int64_t kv_lora_rank, double scale) {
  auto query_start = meta.query_start.contiguous(), context_lens = meta.context_lens.contiguous();
  auto tables = meta.block_tables.contiguous();
  const StepView v{query_start.data_ptr<int32_t>(), context_lens.data_ptr<int32_t>(), tables.data_ptr<int32_t>(),
                   tables.size(1)};
  auto out = at::empty({q.size(0), q.size(1), kv_lora_rank}, q.options());
  std::vector<std::vector<int64_t>> by_length(kMaxBatchedQueryLen + 1);
  for (int64_t s = 0; s < meta.num_seqs; ++s) {
    const int64_t q_len = v.query_len(s);
    if (q_len == 0) continue;
    if (q_len > kMaxBatchedQueryLen) {
      attend(q, cache, v, {s}, kv_lora_rank, scale, out);
    } else {
      by_length[q_len].push_back(s);
    }
  }
  for (const auto& seqs : by_length) {
    if (!seqs.empty()) attend(q, cache, v, seqs, kv_lora_rank, scale, out);
  }
  return out;
}

}  // namespace mtpserve::kernels::cpu
