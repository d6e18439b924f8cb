#include <climits>

#include "kernels/cuda/moe_routing.cuh"

namespace mtpserve::kernels::cuda {

namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kRouteWarps = 4;  // tokens per routing block
constexpr int kGroupWarps = 8;  // the single grouping block's warps

unsigned blocks_for(int64_t n, int threads) { return static_cast<unsigned>((n + threads - 1) / threads); }

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// (value, index) of the warp's best candidate: larger value first, lower index on ties (torch.topk's
// order). Every lane ends with the same answer.
__device__ void warp_argmax(float& value, int& index) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(kFullMask, value, offset);
    const int other_index = __shfl_xor_sync(kFullMask, index, offset);
    if (other > value || (other == value && other_index < index)) {
      value = other;
      index = other_index;
    }
  }
}

// The two largest values among the warp's (best, second) pairs, on every lane.
__device__ void warp_top2(float& best, float& second) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other_best = __shfl_xor_sync(kFullMask, best, offset);
    const float other_second = __shfl_xor_sync(kFullMask, second, offset);
    second = fmaxf(fminf(best, other_best), fmaxf(second, other_second));
    best = fmaxf(best, other_best);
  }
}

// Score of each of the n_group groups (the sum of its two best biased scores), lane g holding group g's.
// Four groups' warp reductions at a time, so that their shuffles overlap.
__device__ float group_score(const float* choice, int groups, int per_group, int lane) {
  constexpr int kAtOnce = 4;
  float mine = -INFINITY;
  for (int g0 = 0; g0 < groups; g0 += kAtOnce) {
    float best[kAtOnce], second[kAtOnce];
#pragma unroll
    for (int i = 0; i < kAtOnce; ++i) {
      best[i] = second[i] = -INFINITY;
      const int g = g0 + i;
      for (int e = g * per_group + lane; g < groups && e < (g + 1) * per_group; e += 32) {
        const float v = choice[e];
        second[i] = fmaxf(second[i], fminf(best[i], v));
        best[i] = fmaxf(best[i], v);
      }
    }
#pragma unroll
    for (int i = 0; i < kAtOnce; ++i) warp_top2(best[i], second[i]);
#pragma unroll
    for (int i = 0; i < kAtOnce; ++i) {
      if (lane == g0 + i) mine = best[i] + second[i];
    }
  }
  return mine;
}

// Bit g set for each of the topk_group best groups.
__device__ unsigned select_groups(float score, int groups, int topk_group, int lane) {
  bool selected = false;
  for (int r = 0; r < topk_group; ++r) {
    float value = lane < groups && !selected ? score : -INFINITY;
    int index = lane < groups && !selected ? lane : INT_MAX;
    warp_argmax(value, index);
    selected |= lane == index;
  }
  return __ballot_sync(kFullMask, selected);
}

// One warp per token; its experts' sigmoid scores and biased choices live in shared memory, expert
// e's on lane e % 32.
__global__ void route_kernel(RouteLaunch p) {
  extern __shared__ float route_smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t token = blockIdx.x * static_cast<int64_t>(kRouteWarps) + warp;
  if (token >= p.tokens) return;
  const int experts = static_cast<int>(p.num_experts), groups = static_cast<int>(p.n_group);
  const int per_group = experts / groups;
  float* score = route_smem + warp * 2 * experts;
  float* choice = score + experts;
  const float* logits = p.logits + token * experts;
  // Eight loads per lane in flight at once, so that their latencies overlap.
  constexpr int kLoads = 8;
  for (int base = 0; base < experts; base += 32 * kLoads) {
    float logit[kLoads], bias[kLoads];
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      const int e = base + 32 * i + lane;
      logit[i] = e < experts ? logits[e] : 0.0f;
      bias[i] = e < experts ? p.bias[e] : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      const int e = base + 32 * i + lane;
      if (e >= experts) continue;
      score[e] = 1.0f / (1.0f + expf(-logit[i]));
      choice[e] = score[e] + bias[i];
    }
  }
  __syncwarp();
  const unsigned eligible_groups =
      select_groups(group_score(choice, groups, per_group, lane), groups, static_cast<int>(p.topk_group), lane);

  // top_k rounds of a warp argmax over the eligible experts not taken yet (bit j: expert lane + 32 j).
  unsigned taken = 0;
  int my_expert = 0;
  float my_weight = 0.0f;
  for (int k = 0; k < p.top_k; ++k) {
    float value = -INFINITY;
    int index = INT_MAX;
    for (int j = 0, e = lane; e < experts; ++j, e += 32) {
      if ((taken >> j & 1u) || !(eligible_groups >> (e / per_group) & 1u)) continue;
      if (choice[e] > value || index == INT_MAX) {
        value = choice[e];
        index = e;
      }
    }
    warp_argmax(value, index);
    if (index % 32 == lane) taken |= 1u << (index / 32);
    if (lane == k) {
      my_expert = index;
      my_weight = score[index];
    }
  }
  // The same fp32 sum on every lane, in k order.
  float total = 0.0f;
  for (int k = 0; k < p.top_k; ++k) total += __shfl_sync(kFullMask, my_weight, k);
  if (lane < p.top_k) {
    const float weight = p.norm_topk_prob ? my_weight / (total + 1e-20f) : my_weight;
    p.weights[token * p.top_k + lane] = weight * p.routed_scaling_factor;
    p.experts[token * p.top_k + lane] = my_expert;
  }
}

// Exclusive prefix sum over the block's threads (of value), in a fixed order.
__device__ int block_exclusive_scan(int value) {
  __shared__ int warp_totals[kGroupWarps];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int inclusive = value;
  for (int offset = 1; offset < 32; offset *= 2) {
    const int other = __shfl_up_sync(kFullMask, inclusive, offset);
    if (lane >= offset) inclusive += other;
  }
  if (lane == 31) warp_totals[warp] = inclusive;
  __syncthreads();
  int before = 0;
  for (int w = 0; w < warp; ++w) before += warp_totals[w];
  return before + inclusive - value;
}

__device__ int clamp_expert(int64_t e, int64_t experts) {
  return static_cast<int>(e < 0 ? 0 : e >= experts ? experts - 1 : e);
}

// One block: warp w owns a contiguous slice of the assignments and counts its experts in its own row
// of `cursor`; the rows become each (warp, expert)'s first grouped row, and each warp then places its
// slice in order, 32 at a time, ranking equal experts among its lanes.
__global__ void group_kernel(GroupLaunch p) {
  extern __shared__ int cursor[];  // [kGroupWarps][num_experts]
  const int experts = static_cast<int>(p.num_experts);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t slice = (p.assignments + kGroupWarps - 1) / kGroupWarps;
  const int64_t begin = warp * slice, end = min(p.assignments, begin + slice);
  int* mine = cursor + warp * experts;

  for (int i = threadIdx.x; i < kGroupWarps * experts; i += blockDim.x) cursor[i] = 0;
  __syncthreads();
  for (int64_t a = begin + lane; a < end; a += 32) atomicAdd(&mine[clamp_expert(p.experts[a], experts)], 1);
  __syncthreads();

  // Thread t turns the counts of experts [t * per, (t + 1) * per) into first rows.
  const int per = (experts + blockDim.x - 1) / blockDim.x;
  const int first = min(experts, static_cast<int>(threadIdx.x) * per), last = min(experts, first + per);
  int total = 0;
  for (int e = first; e < last; ++e) {
    for (int w = 0; w < kGroupWarps; ++w) total += cursor[w * experts + e];
  }
  int row = block_exclusive_scan(total);
  for (int e = first; e < last; ++e) {
    for (int w = 0; w < kGroupWarps; ++w) {
      const int count = cursor[w * experts + e];
      cursor[w * experts + e] = row;
      row += count;
    }
    p.offsets[e] = row;
  }
  __syncthreads();

  for (int64_t base = begin; base < end; base += 32) {
    const int64_t a = base + lane;
    const bool valid = a < end;
    const unsigned active = __ballot_sync(kFullMask, valid);
    int e = 0;
    unsigned peers = 0;
    if (valid) {
      e = clamp_expert(p.experts[a], experts);
      peers = __match_any_sync(active, e);
      const int r = mine[e] + __popc(peers & ((1u << lane) - 1u));
      p.row_of[a] = r;
      p.source[r] = static_cast<int32_t>(a);
    }
    __syncwarp();
    if (valid && lane == __ffs(peers) - 1) mine[e] += __popc(peers);
    __syncwarp();
  }
}

// Block per grouped row, copying it in Unit-sized pieces.
template <typename Unit>
__global__ void gather_kernel(GatherLaunch p, int64_t units_per_row) {
  const int64_t r = blockIdx.x;
  const int64_t token = p.source[r] / p.top_k;
  const Unit* src = static_cast<const Unit*>(p.x) + token * units_per_row;
  Unit* dst = static_cast<Unit*>(p.grouped) + r * units_per_row;
  for (int64_t i = threadIdx.x; i < units_per_row; i += blockDim.x) dst[i] = src[i];
}

template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

// Thread per VEC consecutive outputs of one token; the token's experts are summed in k order in fp32.
template <typename T, int VEC>
__global__ void combine_kernel(CombineLaunch p) {
  const int64_t token = blockIdx.x;
  const int64_t col = (blockIdx.y * static_cast<int64_t>(blockDim.x) + threadIdx.x) * VEC;
  if (col >= p.hidden) return;
  const T* rows = static_cast<const T*>(p.expert_out);
  float sum[VEC] = {};
  for (int64_t k = 0; k < p.top_k; ++k) {
    const int64_t a = token * p.top_k + k;
    const float w = p.weights[a];
    const auto y = *reinterpret_cast<const Pack<T, VEC>*>(rows + p.row_of[a] * p.out_stride + col);
#pragma unroll
    for (int j = 0; j < VEC; ++j) sum[j] += w * to_float(y.v[j]);
  }
  Pack<T, VEC> out;
#pragma unroll
  for (int j = 0; j < VEC; ++j) out.v[j] = from_float<T>(sum[j]);
  *reinterpret_cast<Pack<T, VEC>*>(static_cast<T*>(p.out) + token * p.hidden + col) = out;
}

template <typename Unit>
cudaError_t launch_gather_units(const GatherLaunch& p, int64_t row_bytes, cudaStream_t stream) {
  const int64_t units = row_bytes / static_cast<int64_t>(sizeof(Unit));
  const int threads = units >= 256 ? 256 : 64;
  gather_kernel<Unit><<<static_cast<unsigned>(p.rows), threads, 0, stream>>>(p, units);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_route(const RouteLaunch& p, cudaStream_t stream) {
  if (p.num_experts > kMaxExperts || p.n_group > kMaxGroups || p.top_k > kMaxTopK || p.n_group <= 0 ||
      p.num_experts % p.n_group != 0 || p.topk_group > p.n_group ||
      p.top_k > p.topk_group * (p.num_experts / p.n_group)) {
    return cudaErrorInvalidValue;
  }
  if (p.tokens == 0) return cudaSuccess;
  const size_t smem = kRouteWarps * 2 * p.num_experts * sizeof(float);
  route_kernel<<<blocks_for(p.tokens, kRouteWarps), kRouteWarps * 32, smem, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t launch_group(const GroupLaunch& p, cudaStream_t stream) {
  if (p.num_experts > kMaxExperts || p.num_experts <= 0 || p.assignments > INT_MAX) return cudaErrorInvalidValue;
  const size_t smem = kGroupWarps * p.num_experts * sizeof(int);
  group_kernel<<<1, kGroupWarps * 32, smem, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t launch_gather(const GatherLaunch& p, cudaStream_t stream) {
  if (p.rows == 0 || p.hidden == 0) return cudaSuccess;
  const int64_t row_bytes = p.hidden * (p.dtype == DType::kFloat32 ? 4 : 2);
  const bool aligned = aligned16(p.x) && aligned16(p.grouped);
  if (aligned && row_bytes % 16 == 0) return launch_gather_units<uint4>(p, row_bytes, stream);
  if (row_bytes % 4 == 0 && reinterpret_cast<uintptr_t>(p.x) % 4 == 0) {
    return launch_gather_units<uint32_t>(p, row_bytes, stream);
  }
  return launch_gather_units<uint16_t>(p, row_bytes, stream);
}

cudaError_t launch_combine(const CombineLaunch& p, cudaStream_t stream) {
  if (p.tokens == 0 || p.hidden == 0) return cudaSuccess;
  return dispatch(p.dtype, [&](auto t) {
    using T = decltype(t);
    constexpr int vec = 16 / sizeof(T), threads = 128;
    if (p.hidden % vec == 0 && p.out_stride % vec == 0 && aligned16(p.expert_out) && aligned16(p.out)) {
      const dim3 grid(static_cast<unsigned>(p.tokens), blocks_for(p.hidden / vec, threads));
      combine_kernel<T, vec><<<grid, threads, 0, stream>>>(p);
    } else {
      const dim3 grid(static_cast<unsigned>(p.tokens), blocks_for(p.hidden, threads));
      combine_kernel<T, 1><<<grid, threads, 0, stream>>>(p);
    }
    return cudaGetLastError();
  });
}

}  // namespace mtpserve::kernels::cuda
