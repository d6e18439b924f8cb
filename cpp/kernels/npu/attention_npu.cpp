// MLA attention and cache writes on the NPU through torch_npu's ops (contracts: _op_plugin_docs.py
// of the torch_npu 2.13.0 wheel, quoted where a convention is relied on).
#include "kernels/npu/attention_npu.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "kernels/npu/npu_op.h"

namespace mtpserve::kernels::npu {

namespace {

// npu_fused_infer_attention_score with query_rope/key_rope (MLA) takes 1..16 query rows per
// sequence ("query_rope配置时要求query的S为1-16"); longer queries are cut into pieces of this size.
constexpr int64_t kMaxQueryRows = 16;
// sparse_mode 2..4 take the "optimised" causal mask, always [2048, 2048] ("S的值需要固定为2048").
constexpr int64_t kMaskSize = 2048;

// The sequences of the step as FIA sees them: prefill chunks longer than kMaxQueryRows become
// several pieces, each a sequence of its own whose KV ends where its last row's visibility ends,
// so the right-down causal mask (sparse_mode 3) gives every row exactly the positions it sees.
struct Pieces {
  std::vector<int64_t> query_ends;  // actual_seq_lengths: cumulative query rows (TND layout)
  std::vector<int64_t> kv_lens;     // actual_seq_lengths_kv: per piece (page attention)
  std::vector<int64_t> source_seq;  // the step's sequence of each piece (its block-table row)
  int64_t max_rows = 0;
};

Pieces cut_pieces(const at::Tensor& host_query_start, const at::Tensor& host_context_lens) {
  auto starts = host_query_start.to(at::kLong), contexts = host_context_lens.to(at::kLong);
  const int64_t* qs = starts.data_ptr<int64_t>();
  const int64_t* ctx = contexts.data_ptr<int64_t>();
  Pieces p;
  for (int64_t s = 0; s + 1 < starts.numel(); ++s) {
    const int64_t rows = qs[s + 1] - qs[s];
    for (int64_t first = 0; first < rows; first += kMaxQueryRows) {
      const int64_t n = std::min(kMaxQueryRows, rows - first);
      p.query_ends.push_back(qs[s] + first + n);
      p.kv_lens.push_back(ctx[s] - rows + first + n);
      p.source_seq.push_back(s);
      p.max_rows = std::max(p.max_rows, n);
    }
  }
  return p;
}

// The step's cache blocks, split into the contiguous latent and rope tensors FIA takes ("不支持非
// 连续的Tensor"), with the block table renumbered to them. Only the blocks the step's block tables
// name are copied, not the whole cache.
struct StepKv {
  at::Tensor latent;  // [step blocks, block_size, kv_lora_rank]
  at::Tensor rope;    // [step blocks, block_size, rope_dim]
  at::Tensor tables;  // [pieces, width] int32
};

StepKv gather_step_kv(const at::Tensor& cache, const at::Tensor& block_tables, const Pieces& p,
                      int64_t kv_lora_rank) {
  const int64_t seqs = block_tables.size(0), width = block_tables.size(1);
  auto blocks = cache.index_select(0, block_tables.reshape({-1}).to(at::kLong));
  auto opts = block_tables.options().dtype(at::kInt);
  auto renumbered = at::arange(seqs * width, opts).view({seqs, width});
  auto source = at::tensor(p.source_seq, at::kLong).to(block_tables.device());
  return {blocks.narrow(2, 0, kv_lora_rank).contiguous(),
          blocks.narrow(2, kv_lora_rank, cache.size(2) - kv_lora_rank).contiguous(),
          renumbered.index_select(0, source)};
}

// The causal mask of sparse_mode 3: 1 (masked) above the diagonal, made once per device.
at::Tensor causal_mask(const at::Device& device) {
  static std::mutex mutex;
  static std::unordered_map<at::Device, at::Tensor> masks;
  std::lock_guard<std::mutex> lock(mutex);
  auto& mask = masks[device];
  if (!mask.defined()) {
    mask = at::ones({kMaskSize, kMaskSize}, at::TensorOptions(device).dtype(at::kBool)).triu(1).to(at::kChar);
  }
  return mask;
}

}  // namespace

// npu_scatter_nd_update_(input, indices [N, 1], updates [N, D]) writes row i at input[indices[i]];
// "indices中的索引数据不支持越界" (no out-of-range index), so padded rows (slot < 0) are not skipped but
// redirected, without a host sync: onto the first real row's write with its values (a duplicate of a
// write already made), or, when no row is real, onto cache row 0 with row 0's own content.
void write_latent_cache(const at::Tensor& cache, const at::Tensor& rows, const at::Tensor& slot_mapping) {
  auto flat = cache.view({-1, cache.size(2)});
  auto keep = slot_mapping.ge(0);
  auto first = keep.to(at::kInt).argmax();
  auto any = keep.any();
  auto target_slot = at::where(any, slot_mapping.index_select(0, first.view({1})), 0);
  auto target_row = at::where(any, rows.index_select(0, first.view({1})).to(cache.scalar_type()), flat.narrow(0, 0, 1));
  auto slots = at::where(keep, slot_mapping, target_slot);
  auto values = at::where(keep.unsqueeze(1), rows.to(cache.scalar_type()), target_row);
  call_npu_op("npu_scatter_nd_update_", {{"input", flat}, {"indices", slots.unsqueeze(1)}, {"updates", values}});
}

// Absorbed MLA as vllm-ascend's MTP decode calls it: the latent part of q and of the cache as
// query/key/value, their rotary parts as query_rope/key_rope, one KV head, the paged cache through
// block_table/block_size, layout TND (q [tokens, heads, D], actual_seq_lengths cumulative,
// actual_seq_lengths_kv per sequence "在PA场景下...代表每个Batch的实际长度"). Rows of a sequence
// attend causally from the bottom right: sparse_mode 3 ("rightDownCausal") with the [2048, 2048]
// upper-triangular mask; a step of single-row queries needs no mask (sparse_mode 0).
at::Tensor fused_infer_mla_attention(const at::Tensor& q, const at::Tensor& cache, const AttentionMetadata& meta,
                                     int64_t kv_lora_rank, double scale) {
  const int64_t heads = q.size(1);
  if (q.size(0) == 0 || meta.num_seqs == 0) return at::empty({q.size(0), heads, kv_lora_rank}, q.options());
  const Pieces p = cut_pieces(meta.host_query_start, meta.host_context_lens);
  const StepKv kv = gather_step_kv(cache, meta.block_tables, p, kv_lora_rank);
  const bool causal = p.max_rows > 1;
  const c10::IValue mask = causal ? c10::IValue(causal_mask(q.device())) : c10::IValue();
  auto out = call_npu_op("npu_fused_infer_attention_score",
                         {{"query", q.narrow(2, 0, kv_lora_rank).contiguous()},
                          {"key", kv.latent},
                          {"value", kv.latent},
                          {"query_rope", q.narrow(2, kv_lora_rank, q.size(2) - kv_lora_rank).contiguous()},
                          {"key_rope", kv.rope},
                          {"atten_mask", mask},
                          {"actual_seq_lengths", p.query_ends},
                          {"actual_seq_lengths_kv", p.kv_lens},
                          {"block_table", kv.tables},
                          {"block_size", cache.size(1)},
                          {"num_heads", heads},
                          {"num_key_value_heads", int64_t{1}},
                          {"scale", scale},
                          {"input_layout", std::string("TND")},
                          {"sparse_mode", int64_t{causal ? 3 : 0}}});
  return out[0].toTensor();
}

}  // namespace mtpserve::kernels::npu
