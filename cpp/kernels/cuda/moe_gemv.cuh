#pragma once
// Routed experts for a few tokens (bf16), in two launches instead of a grouped GEMM's eight: at a
// handful of (token, expert) assignments the step reads each selected expert's weights once and is
// bound by launch latency, not by the GEMMs' tiles. Each output row is a warp's dot product, so a
// token's result does not depend on the other tokens of the step.
#include "kernels/cuda/dtype.cuh"

namespace mtpserve::kernels::cuda {

// Assignments (tokens x top_k) up to which the routed experts run as GEMVs: beyond this, tokens share
// experts and a grouped GEMM reads each expert's weights once for all of them.
// Measured at DeepSeek-V3's dims on an H100: 72% of the weight-read floor at 1 token (8
// assignments), but 64% at 4 tokens, where a grouped GEMM gets 79%.
constexpr int64_t kMaxGemvAssignments = 16;
// Experts per token the GEMVs take (DeepSeek-V3 routes to 8).
constexpr int64_t kMaxGemvTopK = 32;

struct ExpertGemvLaunch {
  const __nv_bfloat16* x;        // [tokens, hidden]
  const __nv_bfloat16* gate_up;  // [experts, 2 * inter, hidden]
  const __nv_bfloat16* down;     // [experts, hidden, inter]
  const int64_t* experts;        // [tokens, top_k]
  const float* weights;          // [tokens, top_k]
  __nv_bfloat16* h;              // [tokens * top_k, inter] workspace: silu(gate) * up per assignment
  __nv_bfloat16* out;            // [tokens, hidden]: sum over k in order of weight * expert output, fp32
  int64_t tokens, top_k, hidden, inter, num_experts;
};
// Rounds as the grouped path does: gate, up and each expert's output to bf16, silu(gate) to bf16,
// the weighted sum in fp32 over k in order. Needs hidden and inter multiples of 8, 16-byte aligned rows.
cudaError_t launch_expert_gemv(const ExpertGemvLaunch& p, cudaStream_t stream);

}  // namespace mtpserve::kernels::cuda
