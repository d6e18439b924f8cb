// MoE on the GPU: routing and grouping by our kernels; the bf16 expert GEMMs of a step with a few rows per
// expert (decode and verify) by our wgmma kernel on Hopper, larger steps by torch._grouped_mm, both reading
// only the weights of experts that got rows; no host sync anywhere. One token (and, where the wgmma kernel
// does not run, up to 64 assignments) runs as our expert GEMVs instead. Other dtypes (the fp32 test mode),
// and layouts no fast path takes, compute every expert.
#include "kernels/cuda/moe_cuda.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/cuda/device_info.cuh"
#include "kernels/cuda/expert_gemm_wgmma.cuh"
#include "kernels/cuda/moe_gemv.cuh"
#include "kernels/cuda/moe_routing.cuh"
#include "kernels/cuda/norm_rope.cuh"
#include "kernels/cuda/tensor_args.h"
#include "kernels/moe_all_experts.h"

namespace mtpserve::kernels::cuda {

namespace {

bool aligned16(const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; }

void require_on(const at::Tensor& t, const at::Tensor& like, const std::string& what) {
  require(t.device() == like.device(), "moe_experts: " + what + " must be on " + like.device().str() + ", got " +
                                           t.device().str());
}

void validate_routing(const at::Tensor& logits, const at::Tensor& bias, const RoutingParams& p) {
  require(logits.is_cuda() && logits.dim() == 2, "route_noaux_tc: router_logits must be a CUDA tensor [tokens, experts]");
  const int64_t experts = logits.size(1);
  require(bias.device() == logits.device() && bias.dim() == 1 && bias.size(0) == experts,
          "route_noaux_tc: correction_bias must be [" + std::to_string(experts) + "] on " + logits.device().str());
  require(experts <= kMaxExperts, "route_noaux_tc: at most " + std::to_string(kMaxExperts) + " experts, got " +
                                      std::to_string(experts));
  require(p.n_group >= 1 && p.n_group <= kMaxGroups && experts % p.n_group == 0 && experts / p.n_group >= 2,
          "route_noaux_tc: n_group must divide the experts into groups of at least 2 (and be at most " +
              std::to_string(kMaxGroups) + ")");
  require(p.topk_group >= 1 && p.topk_group <= p.n_group, "route_noaux_tc: topk_group must be in [1, n_group]");
  require(p.top_k >= 1 && p.top_k <= kMaxTopK && p.top_k <= p.topk_group * (experts / p.n_group),
          "route_noaux_tc: top_k must be in [1, " + std::to_string(kMaxTopK) +
              "] and at most the experts of topk_group groups");
}

// _grouped_mm's CUTLASS path runs on sm90/sm100; elsewhere it falls back to a per-expert loop with a
// host sync, which we never take.
bool grouped_mm_fits(const at::Tensor& x) {
  const int major = compute_capability_major(x.device().index());
  return major == 9 || major == 10;
}

// Rows of 16-byte multiples on 16-byte aligned bases: what the GEMV kernels read.
bool gemv_rows_fit(const at::Tensor& x, const at::Tensor& gate_up, const at::Tensor& down) {
  const int64_t elems = 16 / x.element_size();
  return x.size(1) % elems == 0 && down.size(2) % elems == 0 && gate_up.is_contiguous() && down.is_contiguous() &&
         aligned16(gate_up) && aligned16(down);
}

// The expert GEMVs over the tokens: a few assignments in one launch whose blocks group them; more are
// grouped by launch_group first, as many tokens per launch as it takes.
at::Tensor gemv_experts(const at::Tensor& x_in, const at::Tensor& gate_up, const at::Tensor& down,
                        const Routing& routing) {
  auto x = x_in.contiguous();
  auto chosen = routing.experts.contiguous();
  auto weights = routing.weights.to(at::kFloat).contiguous();
  const int64_t tokens = x.size(0), hidden = x.size(1), inter = down.size(2), top_k = chosen.size(1);
  const int64_t experts = gate_up.size(0);
  auto h = at::empty({tokens * top_k, inter}, x.options());
  auto out = at::empty({tokens, hidden}, x.options());
  const bool grouped = tokens * top_k > kMaxGemvAssignments;
  const int64_t per_launch = (grouped ? kMaxGroupedGemvAssignments : kMaxGemvLaunchAssignments) / top_k;
  at::Tensor ints;
  if (grouped) ints = at::empty({experts + 2 * std::min(tokens, per_launch) * top_k}, x.options().dtype(at::kInt));
  for (int64_t first = 0; first < tokens; first += per_launch) {
    const int64_t n = std::min(per_launch, tokens - first);
    ExpertGemvLaunch p{x[first].data_ptr(), gate_up.data_ptr(), down.data_ptr(),
                       chosen[first].data_ptr<int64_t>(), weights[first].data_ptr<float>(),
                       h[first * top_k].data_ptr(), out[first].data_ptr(), n, top_k, hidden, inter,
                       experts, dtype_of(x, "moe_experts")};
    if (grouped) {
      int32_t* ends = ints.data_ptr<int32_t>();
      const GroupLaunch group{p.experts, ends, ends + experts, ends + experts + n * top_k, n * top_k, experts};
      check_launch(launch_group(group, stream_of(x)), "moe_experts: grouping");
      p.group_ends = group.offsets;
      p.group_source = group.source;
    }
    check_launch(launch_expert_gemv(p, stream_of(x)), "moe_experts: expert GEMVs");
  }
  return out;
}

// What both tables check before any path runs.
void validate_experts(const at::Tensor& x, const at::Tensor& gate_up, const at::Tensor& down, const Routing& routing) {
  require(x.is_cuda() && x.dim() == 2, "moe_experts: x must be a CUDA tensor [tokens, hidden]");
  require_on(gate_up, x, "gate_up");
  require_on(down, x, "down");
  require_on(routing.weights, x, "the routing weights");
  require_on(routing.experts, x, "the routing experts");
  const int64_t tokens = x.size(0), hidden = x.size(1);
  require(gate_up.dim() == 3 && down.dim() == 3 && gate_up.size(2) == hidden && down.size(1) == hidden &&
              down.size(0) == gate_up.size(0) && gate_up.size(1) == 2 * down.size(2),
          "moe_experts: gate_up must be [experts, 2 * inter, hidden] and down [experts, hidden, inter]");
  require(gate_up.scalar_type() == x.scalar_type() && down.scalar_type() == x.scalar_type(),
          "moe_experts: the expert weights must have x's dtype");
  require(routing.experts.dim() == 2 && routing.experts.size(0) == tokens &&
              routing.experts.scalar_type() == at::kLong && routing.weights.sizes() == routing.experts.sizes(),
          "moe_experts: routing weights and experts (int64) must be [tokens, top_k]");
  require(gate_up.size(0) <= kMaxExperts, "moe_experts: at most " + std::to_string(kMaxExperts) + " experts");
  dtype_of(x, "moe_experts");  // throws for a dtype no path takes
}

// Rows per expert, on average, up to which a step's expert GEMMs run on our kernel: it streams an expert's
// weights once per 32 of its rows, where torch._grouped_mm pads every expert's rows to a 64- or 128-row tile.
constexpr int64_t kFewRowsPerExpert = 8;

// Whether both expert GEMMs of a step of `rows` assignments fit our wgmma kernel.
bool expert_gemms_fit(int64_t rows, const at::Tensor& gate_up, const at::Tensor& down) {
  const int64_t experts = gate_up.size(0), hidden = gate_up.size(2), inter = down.size(2);
  const DType dtype = dtype_of(gate_up, "moe_experts");
  return expert_gemm_fits(rows, 2 * inter, hidden, experts, dtype) && expert_gemm_fits(rows, hidden, inter, experts, dtype);
}

// Whether a step of `rows` assignments runs both expert GEMMs on our kernel (the fast table's choice).
bool few_rows_per_expert(int64_t rows, const at::Tensor& gate_up, const at::Tensor& down) {
  return rows <= kFewRowsPerExpert * gate_up.size(0) && expert_gemms_fit(rows, gate_up, down);
}

// out[r] = in[r] W[e]^T over launch_group's row groups (`offsets`, cumulative ends per expert), on our kernel.
at::Tensor expert_gemm(const at::Tensor& in, const at::Tensor& weight, const at::Tensor& offsets) {
  const int64_t rows = in.size(0), n = weight.size(1);
  auto out = at::empty({rows, n}, in.options());
  const ExpertGemmLaunch p{in.data_ptr(), weight.data_ptr(), offsets.data_ptr<int32_t>(), out.data_ptr(), rows, n,
                           in.size(1), weight.size(0), dtype_of(in, "moe_experts")};
  check_launch(launch_expert_gemm(p, stream_of(in)), "moe_experts: expert GEMM");
  return out;
}

// The grouped path: grouping, gather, the expert GEMMs (ours where `ours`, else torch._grouped_mm), SiLU and
// the weighted combine.
at::Tensor grouped_experts(const at::Tensor& x_in, const at::Tensor& gate_up, const at::Tensor& down,
                           const Routing& routing, bool ours) {
  auto x = x_in.contiguous();
  const int64_t tokens = x.size(0), hidden = x.size(1), inter = down.size(2);
  const int64_t experts = gate_up.size(0), top_k = routing.experts.size(1), assignments = tokens * top_k;
  const cudaStream_t stream = stream_of(x);
  auto chosen = routing.experts.contiguous();
  auto weights = routing.weights.to(at::kFloat).contiguous();

  auto ints = at::empty({experts + 2 * assignments}, x.options().dtype(at::kInt));
  auto offsets = ints.narrow(0, 0, experts), row_of = ints.narrow(0, experts, assignments),
       source = ints.narrow(0, experts + assignments, assignments);
  const GroupLaunch group{chosen.data_ptr<int64_t>(), offsets.data_ptr<int32_t>(), row_of.data_ptr<int32_t>(),
                          source.data_ptr<int32_t>(), assignments, experts};
  check_launch(launch_group(group, stream), "moe_experts: grouping");

  auto grouped = at::empty({assignments, hidden}, x.options());
  const GatherLaunch gather{x.data_ptr(), source.data_ptr<int32_t>(), grouped.data_ptr(), assignments, top_k, hidden,
                            DType::kBFloat16};
  check_launch(launch_gather(gather, stream), "moe_experts: gather");

  auto gate_up_out = ours ? expert_gemm(grouped, gate_up, offsets)
                          : at::_grouped_mm(grouped, gate_up.transpose(1, 2), offsets);  // [assignments, 2I]
  auto h = at::empty({assignments, inter}, x.options());
  const SiluAndMulLaunch act{gate_up_out.data_ptr(), h.data_ptr(), assignments, inter, gate_up_out.stride(0),
                             DType::kBFloat16};
  check_launch(launch_silu_and_mul(act, stream), "moe_experts: silu_and_mul");
  auto y = ours ? expert_gemm(h, down, offsets) : at::_grouped_mm(h, down.transpose(1, 2), offsets);  // [assignments, H]

  auto out = at::empty({tokens, hidden}, x.options());
  const CombineLaunch combine{y.data_ptr(), row_of.data_ptr<int32_t>(), weights.data_ptr<float>(), out.data_ptr(),
                              tokens, top_k, hidden, y.stride(0), DType::kBFloat16};
  check_launch(launch_combine(combine, stream), "moe_experts: combine");
  return out;
}

}  // namespace

Routing route_noaux_tc(const at::Tensor& router_logits, const at::Tensor& correction_bias, const RoutingParams& p) {
  validate_routing(router_logits, correction_bias, p);
  c10::cuda::CUDAGuard guard(router_logits.device());
  auto logits = router_logits.to(at::kFloat).contiguous();
  auto bias = correction_bias.to(at::kFloat).contiguous();
  const int64_t tokens = logits.size(0), experts = logits.size(1);
  auto weights = at::empty({tokens, p.top_k}, logits.options());
  auto chosen = at::empty({tokens, p.top_k}, logits.options().dtype(at::kLong));
  const RouteLaunch launch{logits.data_ptr<float>(), bias.data_ptr<float>(), weights.data_ptr<float>(),
                           chosen.data_ptr<int64_t>(), tokens, experts, p.n_group, p.topk_group, p.top_k,
                           p.norm_topk_prob, static_cast<float>(p.routed_scaling_factor)};
  check_launch(launch_route(launch, stream_of(logits)), "route_noaux_tc");
  return {weights, chosen};
}

at::Tensor moe_experts(const at::Tensor& x, const at::Tensor& gate_up, const at::Tensor& down,
                       const Routing& routing) {
  validate_experts(x, gate_up, down, routing);
  c10::cuda::CUDAGuard guard(x.device());
  const int64_t tokens = x.size(0);
  if (tokens == 0) return at::empty({0, x.size(1)}, x.options());
  if (x.scalar_type() != at::kBFloat16 || !gemv_rows_fit(x, gate_up, down)) {
    return moe_all_experts(x, gate_up, down, routing);
  }
  const int64_t top_k = routing.experts.size(1);
  // One token reads its experts fastest through the GEMVs (no grouping, gather or combine launches). From two
  // tokens on our expert GEMMs, where they run, read at the copy bandwidth; past a few assignments the grouped
  // GEMMs beat the GEMVs too, which measured 49% of the floor at 64 tokens (docs/benchmarks.md).
  const bool gemv_size = top_k <= kMaxGemvTopK && tokens * top_k <= kMaxGemvAssignments;
  const bool ours = few_rows_per_expert(tokens * top_k, gate_up, down);
  if (gemv_size && (tokens == 1 || !ours)) return gemv_experts(x, gate_up, down, routing);
  if (!ours && !grouped_mm_fits(x)) return moe_all_experts(x, gate_up, down, routing);
  return grouped_experts(x, gate_up, down, routing, ours);
}

at::Tensor moe_experts_batch_invariant(const at::Tensor& x, const at::Tensor& gate_up, const at::Tensor& down,
                                       const Routing& routing) {
  validate_experts(x, gate_up, down, routing);
  c10::cuda::CUDAGuard guard(x.device());
  require(gemv_rows_fit(x, gate_up, down) && routing.experts.size(1) <= kMaxGemvTopK,
          "moe_experts (--batch_invariant): hidden and moe_intermediate_size must be multiples of " +
              std::to_string(16 / x.element_size()) + " and top_k at most " + std::to_string(kMaxGemvTopK) +
              ", with contiguous 16-byte aligned expert weights");
  const int64_t tokens = x.size(0), top_k = routing.experts.size(1);
  if (tokens == 0) return at::empty({0, x.size(1)}, x.options());
  // On Hopper our expert GEMMs: each output is one row's tensor-core dot product over K in a fixed order,
  // whatever else shares its pass, and SiLU and the combine are per row, so a token's bits do not depend on
  // the step. Elsewhere (and in fp16/fp32) the GEMVs.
  if (x.scalar_type() != at::kBFloat16 || !expert_gemms_fit(kMaxExpertGemmRows, gate_up, down)) {
    return gemv_experts(x, gate_up, down, routing);
  }
  const int64_t per_launch = kMaxExpertGemmRows / top_k;
  if (tokens <= per_launch) return grouped_experts(x, gate_up, down, routing, /*ours=*/true);
  std::vector<at::Tensor> parts;
  for (int64_t first = 0; first < tokens; first += per_launch) {
    const int64_t n = std::min(per_launch, tokens - first);
    const Routing part{routing.weights.narrow(0, first, n), routing.experts.narrow(0, first, n)};
    parts.push_back(grouped_experts(x.narrow(0, first, n), gate_up, down, part, /*ours=*/true));
  }
  return at::cat(parts);
}

}  // namespace mtpserve::kernels::cuda
