#pragma once
// DeepSeek MoE on the device without a host sync: noaux_tc routing for every token in one launch,
// the (token, k) assignments grouped by expert in one launch (counts, offsets, a stable order), the
// gather of each grouped row's input, and the weighted combine of the expert outputs per token.
#include "kernels/cuda/dtype.cuh"

namespace mtpserve::kernels::cuda {

// Experts per layer these kernels take (DeepSeek-V3 has 256): a warp holds a token's experts as
// 32 per lane, and the grouping keeps per-warp counts of every expert in shared memory.
constexpr int64_t kMaxExperts = 1024;
// Expert groups per layer (a lane holds one group's score) and experts per token (a lane holds one).
constexpr int64_t kMaxGroups = 32;
constexpr int64_t kMaxTopK = 32;

struct RouteLaunch {
  const float* logits;  // [tokens, experts] router logits
  const float* bias;    // [experts] e_score_correction_bias
  float* weights;       // [tokens, top_k]
  int64_t* experts;     // [tokens, top_k], by descending biased score
  int64_t tokens, num_experts, n_group, topk_group, top_k;
  bool norm_topk_prob;
  float routed_scaling_factor;
};
cudaError_t launch_route(const RouteLaunch& p, cudaStream_t stream);

struct GroupLaunch {
  const int64_t* experts;  // [assignments]: expert of assignment a = token * top_k + k
  int32_t* offsets;        // [num_experts]: cumulative ends of the experts' row groups (_grouped_mm's offs)
  int32_t* row_of;         // [assignments]: grouped row of assignment a
  int32_t* source;         // [assignments]: assignment of grouped row r (inverse of row_of)
  int64_t assignments, num_experts;
};
// Counting sort of the assignments by expert, stable: within an expert's group, rows follow the
// assignment order, so the grouping (and every result) is the same on every run. Expert ids outside
// [0, num_experts) are clamped into it (memory safety; the routing never produces them).
cudaError_t launch_group(const GroupLaunch& p, cudaStream_t stream);

struct GatherLaunch {
  const void* x;          // [tokens, hidden] contiguous
  const int32_t* source;  // [rows]
  void* grouped;          // [rows, hidden]: row r is x[source[r] / top_k]
  int64_t rows, top_k, hidden;
  DType dtype;
};
cudaError_t launch_gather(const GatherLaunch& p, cudaStream_t stream);

struct CombineLaunch {
  const void* expert_out;  // [tokens * top_k, hidden] in grouped order, rows out_stride elements apart
  const int32_t* row_of;   // [tokens * top_k]
  const float* weights;    // [tokens, top_k]
  void* out;               // [tokens, hidden]: sum over k in order of weight * expert_out, in fp32
  int64_t tokens, top_k, hidden, out_stride;
  DType dtype;
};
cudaError_t launch_combine(const CombineLaunch& p, cudaStream_t stream);

}  // namespace mtpserve::kernels::cuda
