#pragma once
// Routed experts as GEMVs over the distinct experts of a few assignments, in two launches. At a
// handful of tokens (decode and verify at small batch) the step reads each selected expert's weights
// once, for every assignment that chose it, and is bound by memory bandwidth, not by a grouped
// GEMM's tiles. Each output row is a warp's dot product (warp_dot.cuh), so a token's result does not
// depend on the other tokens of the step: under --batch_invariant every MoE step runs here, whatever
// its size, where the wgmma expert GEMMs do not (off Hopper, fp16, fp32).
#include "kernels/cuda/dtype.cuh"

namespace mtpserve::kernels::cuda {

// Assignments (tokens x top_k) up to which one launch's blocks group a step by expert themselves; more
// are grouped by launch_group first (moe_cuda.cpp).
constexpr int64_t kMaxGemvAssignments = 64;
// Experts per token the GEMVs take (DeepSeek-V3 routes to 8).
constexpr int64_t kMaxGemvTopK = 32;
// Assignments one launch takes when each block groups them by expert in shared memory (its search is
// quadratic in them), and when launch_group has grouped them; callers split larger steps by tokens.
constexpr int64_t kMaxGemvLaunchAssignments = 128;
constexpr int64_t kMaxGroupedGemvAssignments = 2048;

struct ExpertGemvLaunch {
  const void* x;           // [tokens, hidden]
  const void* gate_up;     // [experts, 2 * inter, hidden]
  const void* down;        // [experts, hidden, inter]
  const int64_t* experts;  // [tokens, top_k]
  const float* weights;    // [tokens, top_k]
  void* h;                 // [tokens * top_k, inter] workspace: silu(gate) * up per assignment
  void* out;               // [tokens, hidden]: sum over k in order of weight * expert output, fp32
  int64_t tokens, top_k, hidden, inter, num_experts;
  DType dtype;
  // launch_group's grouping of these assignments ([num_experts] cumulative ends, [tokens * top_k] assignment
  // of each grouped row), or null: the blocks then group the assignments themselves.
  const int32_t* group_ends = nullptr;
  const int32_t* group_source = nullptr;
};
// Rounds as the grouped path does: gate, up and each expert's output to the dtype, silu(gate) too,
// the weighted sum in fp32 over k in order; the grouping changes which launch finds an assignment's
// expert, never its arithmetic, so both give the same bits. Needs hidden and inter multiples of 16 bytes
// of the dtype, 16-byte aligned rows, and tokens * top_k <= kMaxGemvLaunchAssignments
// (kMaxGroupedGemvAssignments with a grouping).
cudaError_t launch_expert_gemv(const ExpertGemvLaunch& p, cudaStream_t stream);

}  // namespace mtpserve::kernels::cuda
