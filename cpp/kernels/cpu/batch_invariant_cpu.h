#pragma once
// Batch-invariant CPU kernels (--batch_invariant): each token row's result is a function of that
// row (and, for attention, of its sequence's cache) alone, bit for bit, whatever the other rows of
// the step, how many query rows its sequence has (decode 1, MTP verify k + 1, a prefill chunk), its
// position in the batch, the padding, and the intra-op thread count.
//  - GEMMs: rows padded to a multiple of a fixed tile of T rows, one at::linear per tile: torch's CPU
//    GEMM computes a row of a T-row product the same way whatever the tile's other rows and the
//    thread count (checked for the shapes we run by tests/test_batch_invariance.py), while its
//    blocking for M rows depends on M.
//  - Attention: a C++ loop per (query row, head) over the row's visible KV positions in order.
//  - Norms, SiLU, routing and the MoE combine: C++ loops per row, reducing in a fixed order (no
//    vectorised tails whose placement depends on the tensor size).
//  - MoE: every expert's rows go through the tiled GEMMs, so a token's expert output does not
//    depend on how many tokens share the expert; the top-k outputs are combined in fp32 per token.
#include "kernels/kernel_ops.h"

namespace mtpserve::kernels::cpu::batch_invariant {

// Rows per GEMM tile.
constexpr int64_t kRowTile = 16;

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight);
at::Tensor head_matmul(const at::Tensor& x, const at::Tensor& weight);
at::Tensor mla_attention(const at::Tensor& q, const at::Tensor& cache, const AttentionMetadata& meta,
                         int64_t kv_lora_rank, double scale);
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);
std::pair<at::Tensor, at::Tensor> add_rms_norm(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& weight,
                                               double eps);
at::Tensor silu_and_mul(const at::Tensor& gate_up);
Routing route_noaux_tc(const at::Tensor& router_logits, const at::Tensor& correction_bias, const RoutingParams& p);
at::Tensor moe_experts(const at::Tensor& x, const at::Tensor& gate_up, const at::Tensor& down, const Routing& routing);

}  // namespace mtpserve::kernels::cpu::batch_invariant
