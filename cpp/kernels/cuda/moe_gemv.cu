#include "kernels/cuda/moe_gemv.cuh"

#include "kernels/cuda/warp_dot.cuh"

namespace mtpserve::kernels::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kRowsPerWarp = 4;  // hidden and inter are multiples of 4, so a warp's rows are all in range

// The launch's distinct experts in order of first appearance, built by each block in shared memory:
// each expert's weights are then read once for all the assignments that chose it.
struct ExpertSlots {
  int expert[kMaxGemvLaunchAssignments];  // of each assignment
  bool first[kMaxGemvLaunchAssignments];  // whether no earlier assignment chose the same expert
  int slot_expert[kMaxGemvLaunchAssignments];
  int count;
};
static_assert(kThreads >= kMaxGemvLaunchAssignments, "a thread per assignment builds the slots");

__device__ int expert_of(const ExpertGemvLaunch& p, int64_t assignment) {
  const int64_t e = p.experts[assignment];
  return static_cast<int>(e < 0 ? 0 : (e >= p.num_experts ? p.num_experts - 1 : e));  // memory safety only
}

// M == 1 launches hold one token, whose experts are all distinct: its assignments are the slots.
template <int M>
__device__ void build_slots(const ExpertGemvLaunch& p, ExpertSlots& s) {
  const int assignments = static_cast<int>(p.tokens * p.top_k), a = threadIdx.x;
  if (a < assignments) s.expert[a] = expert_of(p, a);
  if constexpr (M == 1) {
    if (a < assignments) s.slot_expert[a] = s.expert[a];
    if (a == 0) s.count = assignments;
    __syncthreads();
    return;
  }
  __syncthreads();
  bool first = a < assignments;
  for (int j = 0; first && j < a; ++j) first = s.expert[j] != s.expert[a];
  if (a < assignments) s.first[a] = first;
  const int count = __syncthreads_count(first);
  if (first) {
    int slot = 0;
    for (int j = 0; j < a; ++j) slot += s.first[j];
    s.slot_expert[slot] = s.expert[a];
  }
  if (a == 0) s.count = count;
  __syncthreads();
}

// Calls f(members, n) for the assignments of slot `slot`, M at a time in assignment order (n <= M).
template <int M, typename F>
__device__ void for_member_batches(const ExpertSlots& s, int assignments, int slot, F&& f) {
  int members[M], n = 0;
  if constexpr (M == 1) {
    members[0] = slot;
    f(members, 1);
    return;
  }
  const int e = s.slot_expert[slot];
  for (int base = 0; base < assignments; base += 32) {
    const int a = base + threadIdx.x % 32;
    unsigned mask = __ballot_sync(0xffffffffu, a < assignments && s.expert[a] == e);
    while (mask != 0) {
      members[n++] = base + __ffs(mask) - 1;
      mask &= mask - 1;
      if (n == M) {
        f(members, n);
        n = 0;
      }
    }
  }
  if (n > 0) f(members, n);
}

// Calls f(members, n) for the assignments of grouped rows [begin, end) (one expert's, in assignment order, as
// launch_group sorts them), M at a time.
template <int M, typename F>
__device__ void for_group_batches(const int32_t* source, int begin, int end, F&& f) {
  for (int r = begin; r < end; r += M) {
    const int n = min(M, end - r);
    int members[M];
#pragma unroll
    for (int m = 0; m < M; ++m) members[m] = source[r + (m < n ? m : 0)];
    f(members, n);
  }
}

// The grouped rows [begin, end) of expert e (launch_group's cumulative ends).
__device__ __forceinline__ int2 group_range(const ExpertGemvLaunch& p, int e) {
  return make_int2(e == 0 ? 0 : p.group_ends[e - 1], p.group_ends[e]);
}

// h[a, i] = silu(gate_i . x) * (up_i . x) for the warp's rows of expert e and every assignment a that
// for_batches(f) hands out, M of them per pass over the rows.
template <typename T, int M, typename Batches>
__device__ void up_rows(const ExpertGemvLaunch& p, int e, int64_t first, Batches&& for_batches) {
  const T* gate = static_cast<const T*>(p.gate_up) + (e * 2 * p.inter + first) * p.hidden;
  const T* w[2 * kRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    w[r] = gate + r * p.hidden;
    w[kRowsPerWarp + r] = gate + (p.inter + r) * p.hidden;
  }
  const int lane = threadIdx.x % 32;
  for_batches([&](const int (&a)[M], int n) {
    const T* xs[M];
#pragma unroll
    for (int m = 0; m < M; ++m) xs[m] = static_cast<const T*>(p.x) + a[m < n ? m : 0] / p.top_k * p.hidden;
    float dots[M][2 * kRowsPerWarp];
    warp_dot_rows<T, M, 2 * kRowsPerWarp>(xs, n, w, p.hidden, dots);
#pragma unroll
    for (int m = 0; m < M; ++m) {
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        if (lane != m * kRowsPerWarp + r || m >= n) continue;
        const float g = round_to<T>(dots[m][r]);
        const float silu = round_to<T>(g / (1.0f + expf(-g)));
        static_cast<T*>(p.h)[a[m] * p.inter + first + r] =
            from_float<T>(__fmul_rn(silu, round_to<T>(dots[m][kRowsPerWarp + r])));
      }
    }
  });
}

__device__ __forceinline__ int64_t first_up_row() {
  return (static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32) * kRowsPerWarp;
}

// Grid (inter / (warps * rows per warp), slots): the experts found in shared memory.
template <typename T, int M>
__global__ void __launch_bounds__(kThreads) expert_up_kernel(ExpertGemvLaunch p) {
  __shared__ ExpertSlots slots;
  build_slots<M>(p, slots);
  const int64_t first = first_up_row();
  if (static_cast<int>(blockIdx.y) >= slots.count || first >= p.inter) return;
  const int assignments = static_cast<int>(p.tokens * p.top_k);
  up_rows<T, M>(p, slots.slot_expert[blockIdx.y], first,
                [&](auto&& f) { for_member_batches<M>(slots, assignments, blockIdx.y, f); });
}

// Grid (inter / (warps * rows per warp), experts): expert blockIdx.y's grouped rows; blocks of experts
// nobody chose return at once.
template <typename T, int M>
__global__ void __launch_bounds__(kThreads) expert_up_grouped_kernel(ExpertGemvLaunch p) {
  const int e = static_cast<int>(blockIdx.y);
  const int2 range = group_range(p, e);
  const int64_t first = first_up_row();
  if (range.x == range.y || first >= p.inter) return;
  up_rows<T, M>(p, e, first, [&](auto&& f) { for_group_batches<M>(p.group_source, range.x, range.y, f); });
}

// outputs[a][r] = down_r . h[a] (rounded to T) for the block's rows first + r of expert e and every assignment
// a that for_batches(f) hands out.
template <typename T, int M, typename Batches>
__device__ void down_rows(const ExpertGemvLaunch& p, int e, int64_t first, float (*outputs)[kRowsPerWarp],
                          Batches&& for_batches) {
  const T* w[kRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) w[r] = static_cast<const T*>(p.down) + (e * p.hidden + first + r) * p.inter;
  const int lane = threadIdx.x % 32;
  for_batches([&](const int (&a)[M], int n) {
    const T* hs[M];
#pragma unroll
    for (int m = 0; m < M; ++m) hs[m] = static_cast<const T*>(p.h) + a[m < n ? m : 0] * p.inter;
    float y[M][kRowsPerWarp];
    warp_dot_rows<T, M, kRowsPerWarp>(hs, n, w, p.inter, y);
#pragma unroll
    for (int m = 0; m < M; ++m) {
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        if (lane == m * kRowsPerWarp + r && m < n) outputs[a[m]][r] = round_to<T>(y[m][r]);
      }
    }
  });
}

// out[t, first + r] = sum over k in order of weight_k * outputs[t * top_k + k][r], once every warp's
// outputs are in.
template <typename T>
__device__ void combine_rows(const ExpertGemvLaunch& p, int64_t first, const float (*outputs)[kRowsPerWarp]) {
  __syncthreads();
  for (int i = threadIdx.x; i < p.tokens * kRowsPerWarp; i += kThreads) {
    const int64_t token = i / kRowsPerWarp;
    const int r = i % kRowsPerWarp;
    float sum = 0.0f;
    for (int64_t k = 0; k < p.top_k; ++k) sum += p.weights[token * p.top_k + k] * outputs[token * p.top_k + k][r];
    static_cast<T*>(p.out)[token * p.hidden + first + r] = from_float<T>(sum);
  }
}

// Grid (hidden / rows per warp): out[t, r] = sum_k weight_k * (down_r . h[t, k]). The block's warps
// split the distinct experts of the same rows (a step's few experts alone would leave most SMs idle),
// and the block sums each token's expert outputs in k order.
template <typename T, int M>
__global__ void __launch_bounds__(kThreads) expert_down_kernel(ExpertGemvLaunch p) {
  __shared__ ExpertSlots slots;
  __shared__ float outputs[kMaxGemvLaunchAssignments][kRowsPerWarp];
  build_slots<M>(p, slots);
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kRowsPerWarp;
  const int assignments = static_cast<int>(p.tokens * p.top_k);
  for (int s = threadIdx.x / 32; s < slots.count; s += kWarps) {
    down_rows<T, M>(p, slots.slot_expert[s], first, outputs,
                    [&](auto&& f) { for_member_batches<M>(slots, assignments, s, f); });
  }
  combine_rows<T>(p, first, outputs);
}

// The same over launch_group's grouping: the warps take the experts in turn and skip those nobody chose.
template <typename T, int M>
__global__ void __launch_bounds__(kThreads) expert_down_grouped_kernel(ExpertGemvLaunch p) {
  __shared__ float outputs[kMaxGroupedGemvAssignments][kRowsPerWarp];
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kRowsPerWarp;
  for (int e = threadIdx.x / 32; e < p.num_experts; e += kWarps) {
    const int2 range = group_range(p, e);
    if (range.x == range.y) continue;
    down_rows<T, M>(p, e, first, outputs, [&](auto&& f) { for_group_batches<M>(p.group_source, range.x, range.y, f); });
  }
  combine_rows<T>(p, first, outputs);
}

unsigned blocks_for_rows(int64_t rows) {
  constexpr int64_t per_block = kWarps * kRowsPerWarp;
  return static_cast<unsigned>((rows + per_block - 1) / per_block);
}

// One token's experts are all distinct: one assignment per pass. Several tokens share experts.
template <typename T, int M>
cudaError_t launch_with(const ExpertGemvLaunch& p, cudaStream_t stream) {
  const int64_t slots = p.tokens * p.top_k < p.num_experts ? p.tokens * p.top_k : p.num_experts;
  expert_up_kernel<T, M>
      <<<dim3(blocks_for_rows(p.inter), static_cast<unsigned>(slots)), kThreads, 0, stream>>>(p);
  if (const cudaError_t status = cudaGetLastError(); status != cudaSuccess) return status;
  expert_down_kernel<T, M><<<static_cast<unsigned>(p.hidden / kRowsPerWarp), kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_grouped(const ExpertGemvLaunch& p, cudaStream_t stream) {
  expert_up_grouped_kernel<T, kRowsPerWarp>
      <<<dim3(blocks_for_rows(p.inter), static_cast<unsigned>(p.num_experts)), kThreads, 0, stream>>>(p);
  if (const cudaError_t status = cudaGetLastError(); status != cudaSuccess) return status;
  const auto down_blocks = static_cast<unsigned>(p.hidden / kRowsPerWarp);
  expert_down_grouped_kernel<T, kRowsPerWarp><<<down_blocks, kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_expert_gemv(const ExpertGemvLaunch& p, cudaStream_t stream) {
  if (p.tokens == 0) return cudaSuccess;
  const bool grouped = p.group_ends != nullptr;
  const int64_t most = grouped ? kMaxGroupedGemvAssignments : kMaxGemvLaunchAssignments;
  return dispatch(p.dtype, [&](auto t) {
    using T = decltype(t);
    if (p.hidden % kChunkElems<T> != 0 || p.inter % kChunkElems<T> != 0 || p.top_k > kMaxGemvTopK ||
        p.tokens * p.top_k > most || (grouped && p.group_source == nullptr)) {
      return cudaErrorInvalidValue;
    }
    if (grouped) return launch_grouped<T>(p, stream);
    return p.tokens == 1 ? launch_with<T, 1>(p, stream) : launch_with<T, kRowsPerWarp>(p, stream);
  });
}

}  // namespace mtpserve::kernels::cuda
