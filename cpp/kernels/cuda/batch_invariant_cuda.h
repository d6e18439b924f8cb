#pragma once
// The CUDA table for --batch_invariant: every op gives each token row bit-identical results whatever
// the other rows of the step, its sequence's number of query rows (decode, MTP verify, prefill chunk),
// its position and the graph bucket's padding. How each op keeps it:
//  - GEMMs (projections, router in fp32, LM head, per-head absorbed MLA matmuls): row_invariant_gemm.cuh,
//    one fixed reduction order per element instead of cuBLAS's row-count-dependent kernels.
//  - Attention: the same kernels with KV splits at fixed boundaries (fixed_kv_splits).
//  - MoE: in bf16 on compute capability 9.0, our wgmma expert GEMMs for every step size (expert_gemm_wgmma.cuh:
//    one row's fixed-order tensor-core dot products, whatever shares its pass); elsewhere the expert GEMVs
//    (moe_gemv.cuh); combined in fp32 in k order per token.
//  - RMSNorm (threads by row width), RoPE, SiLU, routing and sampling are per-row kernels already:
//    shared with the fast table.
#include "kernels/kernel_ops.h"

namespace mtpserve::kernels::cuda {

at::Tensor row_invariant_linear(const at::Tensor& x, const at::Tensor& weight);
at::Tensor row_invariant_head_matmul(const at::Tensor& x, const at::Tensor& weight);

}  // namespace mtpserve::kernels::cuda
