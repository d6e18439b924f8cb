#pragma once
// The routed experts' GEMMs of a decode or verify step on Hopper (wgmma): out[r] = in[r] W[e]^T for the rows r
// of each expert e's group, as torch._grouped_mm computes them, for steps of a few rows per expert. There each
// expert's weights dominate the bytes, and the kernel streams only the weights of experts that got rows, once
// per 32 of their rows, through a ring of bulk tensor copies: the weight rows are wgmma's M, the expert's rows
// (tokens) its N. fp32 accumulation in a fixed order over K, one bf16/fp16 rounding at the end, and a row's
// result does not depend on the rows beside it in its pass: --batch_invariant runs every MoE step here.
#include "kernels/cuda/dtype.cuh"

namespace mtpserve::kernels::cuda {

// Rows (expert assignments) one launch takes: its blocks list the experts' passes in shared memory.
constexpr int64_t kMaxExpertGemmRows = 8192;

struct ExpertGemmLaunch {
  const void* in;        // [rows, k], grouped by expert
  const void* weight;    // [experts, n, k] contiguous
  const int32_t* ends;   // [experts]: cumulative ends of the experts' row groups (launch_group's offsets)
  void* out;             // [rows, n]
  int64_t rows, n, k, experts;
  DType dtype;
};

// Whether the kernel takes a step of `rows` [rows, k] x [experts, n, k]: bf16/fp16, k a multiple of 64, n of 128,
// at most 1024 experts and kMaxExpertGemmRows rows, on a compute capability 9.0 device.
bool expert_gemm_fits(int64_t rows, int64_t n, int64_t k, int64_t experts, DType dtype);

// cudaErrorInvalidValue where the kernel does not fit, or a base is not 16-byte aligned.
cudaError_t launch_expert_gemm(const ExpertGemmLaunch& p, cudaStream_t stream);

}  // namespace mtpserve::kernels::cuda
