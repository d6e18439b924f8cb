#include "kernels/cuda/expert_gemm_wgmma.cuh"

#include <climits>

#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/device_info.cuh"
#include "kernels/cuda/tensor_map.cuh"
#include "kernels/cuda/wgmma.cuh"

namespace mtpserve::kernels::cuda {

namespace {

// A unit of work is 128 weight rows (output columns) of one expert against up to 32 of its rows: wgmma's M is
// the weight rows, 64 per warpgroup, and N the expert's rows. Every block walks its units with K in 64-wide
// chunks, and one producer thread keeps the ring of stages full across units, so no unit starts cold.
constexpr int kUnitCols = 128;
constexpr int kPassRows = 32;
constexpr int kStages = 8;
constexpr int kConsumerThreads = 256;                     // two warpgroups
constexpr int kThreads = kConsumerThreads + 32;           // and the producer warp
constexpr int kWeightBytes = kUnitCols * 128;             // a stage's weight chunk: 128 rows of 64 K
constexpr int kInBytes = kPassRows * 128;                 // and its input chunk: 32 rows of 64 K
constexpr int kStageBytes = kWeightBytes + kInBytes;
constexpr int kMaxPassExperts = 1024;
constexpr int kMaxPasses = kMaxPassExperts + kMaxExpertGemmRows / kPassRows;  // at most one partial pass per expert

// One expert's rows [first, end), at most kPassRows of them.
struct Pass {
  int expert, first, end;
};
constexpr size_t kSmemBytes = kStages * kStageBytes + 2 * kStages * 8 + kMaxPasses * sizeof(Pass) + 16 + 1024;
static_assert(kSmemBytes <= 227 * 1024, "shared memory");

#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)

// The experts' passes in expert order, built by warp 0: lane i takes experts [i * per, (i + 1) * per). Ends
// are clamped into [0, rows] and made monotone (memory safety; launch_group never writes others).
__device__ int build_passes(const ExpertGemmLaunch& p, Pass* passes) {
  const int lane = threadIdx.x & 31;
  const int experts = static_cast<int>(p.experts), rows = static_cast<int>(p.rows);
  const int per = (experts + 31) / 32, e0 = min(experts, lane * per), e1 = min(experts, e0 + per);
  const auto end_of = [&](int e) { return e < 0 ? 0 : min(max(p.ends[e], 0), rows); };
  int count = 0;
  for (int e = e0, begin = end_of(e0 - 1); e < e1; ++e) {
    const int end = max(begin, end_of(e));
    count += (end - begin + kPassRows - 1) / kPassRows;
    begin = end;
  }
  int inclusive = count;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int t = __shfl_up_sync(0xffffffffu, inclusive, d);
    if (lane >= d) inclusive += t;
  }
  int at = inclusive - count;
  for (int e = e0, begin = end_of(e0 - 1); e < e1; ++e) {
    const int end = max(begin, end_of(e));
    for (int first = begin; first < end && at < kMaxPasses; first += kPassRows) {
      passes[at++] = Pass{e, first, min(end, first + kPassRows)};
    }
    begin = end;
  }
  return min(__shfl_sync(0xffffffffu, inclusive, 31), kMaxPasses);
}

template <typename T>
__global__ void __launch_bounds__(kThreads, 1)
    expert_gemm_kernel(const ExpertGemmLaunch p, const __grid_constant__ CUtensorMap weight_map,
                       const __grid_constant__ CUtensorMap in_map) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* stages = smem_raw + (1024 - smem_addr(smem_raw) % 1024) % 1024;
  const uint32_t stage_addr = smem_addr(stages);
  const uint32_t full = stage_addr + kStages * kStageBytes, empty = full + 8 * kStages;
  Pass* passes = reinterpret_cast<Pass*>(stages + kStages * kStageBytes + 16 * kStages);
  int* pass_count = reinterpret_cast<int*>(passes + kMaxPasses);

  if (threadIdx.x < 32) {
    const int count = build_passes(p, passes);
    if (threadIdx.x == 0) {
      *pass_count = count;
      for (int s = 0; s < kStages; ++s) {
        mbarrier_init(full + 8 * s, 1);
        mbarrier_init(empty + 8 * s, kConsumerThreads / 32);
      }
      fence_barrier_init();
    }
  }
  __syncthreads();
  const int slabs = static_cast<int>(p.n / kUnitCols), chunks = static_cast<int>(p.k / kMapBoxCols);
  const int units = *pass_count * slabs;

  if (threadIdx.x >= kConsumerThreads) {  // the producer
    if (threadIdx.x != kConsumerThreads) return;
    uint32_t g = 0;  // chunks issued so far: stage g % kStages, its round g / kStages
    for (int u = blockIdx.x; u < units; u += gridDim.x) {
      const Pass pass = passes[u / slabs];
      const int weight_row = pass.expert * static_cast<int>(p.n) + (u % slabs) * kUnitCols;
      for (int c = 0; c < chunks; ++c, ++g) {
        const uint32_t s = g % kStages, bar = full + 8 * s, dst = stage_addr + s * kStageBytes;
        if (g >= kStages) mbarrier_wait(empty + 8 * s, (g / kStages - 1) & 1);
        mbarrier_expect(bar, kStageBytes);
        bulk_box(dst, &weight_map, c * kMapBoxCols, weight_row, bar);
        bulk_box(dst + kWeightBytes, &in_map, c * kMapBoxCols, pass.first, bar);  // rows past the tensor read 0
      }
    }
    return;
  }

  const int group = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x >> 7), 0);
  const int warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
  const int tq = lane & 3, gid = lane >> 2;
  T* out = static_cast<T*>(p.out);
  uint32_t g = 0;
  for (int u = blockIdx.x; u < units; u += gridDim.x) {
    const Pass pass = passes[u / slabs];
    float d[4][4];
#pragma unroll
    for (int j = 0; j < 4; ++j) d[j][0] = d[j][1] = d[j][2] = d[j][3] = 0.0f;
    for (int c = 0; c < chunks; ++c, ++g) {
      const uint32_t s = g % kStages, base = stage_addr + s * kStageBytes;
      mbarrier_wait(full + 8 * s, (g / kStages) & 1);
      const uint64_t a = wgmma::smem_desc(base + group * 64 * 128, 16, 1024);
      const uint64_t b = wgmma::smem_desc(base + kWeightBytes, 16, 1024);
      wgmma::fence();
#pragma unroll
      for (int ks = 0; ks < kMapBoxCols / 16; ++ks) wgmma::mma_ss_n32<T>(d, a + ks * 2, b + ks * 2, 1);  // +32 bytes
      wgmma::commit();
      wgmma::wait<1>();  // the chunk before is done: its stage may be refilled
      if (c > 0 && lane == 0) mbarrier_arrive(empty + 8 * ((g - 1) % kStages));
    }
    wgmma::wait<0>();
    wgmma::fence_operands(d);
    if (lane == 0) mbarrier_arrive(empty + 8 * ((g - 1) % kStages));
    // d[j][c]: weight row (output column) 16 * warp + gid + 8 * (c >> 1) of this warpgroup's 64, pass row
    // 8j + 2tq + (c & 1).
    const int64_t col = (u % slabs) * kUnitCols + group * 64 + warp * 16 + gid;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int row = pass.first + 8 * j + 2 * tq + (c & 1);
        if (row < pass.end) out[row * p.n + col + 8 * (c >> 1)] = from_float<T>(d[j][c]);
      }
    }
  }
}

#else

template <typename T>
__global__ void __launch_bounds__(kThreads, 1)
    expert_gemm_kernel(const ExpertGemmLaunch, const __grid_constant__ CUtensorMap, const __grid_constant__ CUtensorMap) {
  __trap();
}

#endif

template <typename T>
cudaError_t launch_typed(const ExpertGemmLaunch& p, cudaStream_t stream) {
  CUtensorMap weight_map{}, in_map{};
  if (!encode_swizzled_map(weight_map, p.weight, p.dtype, p.experts * p.n, p.k, kUnitCols) ||
      !encode_swizzled_map(in_map, p.in, p.dtype, p.rows, p.k, kPassRows)) {
    return cudaErrorInvalidValue;
  }
  const cudaError_t status = allow_smem<expert_gemm_kernel<T>>(kSmemBytes);
  if (status != cudaSuccess) return status;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return cudaErrorInvalidDevice;
  const unsigned grid = static_cast<unsigned>(multiprocessor_count(device));  // persistent: units come from the device
  expert_gemm_kernel<T><<<grid, kThreads, kSmemBytes, stream>>>(p, weight_map, in_map);
  return cudaGetLastError();
}

}  // namespace

bool expert_gemm_fits(int64_t rows, int64_t n, int64_t k, int64_t experts, DType dtype) {
  return dtype != DType::kFloat32 && k > 0 && k % kMapBoxCols == 0 && n > 0 && n % kUnitCols == 0 && experts >= 1 &&
         experts <= kMaxPassExperts && rows <= kMaxExpertGemmRows && experts * n <= INT32_MAX && sm90a_device();
}

cudaError_t launch_expert_gemm(const ExpertGemmLaunch& p, cudaStream_t stream) {
  const auto aligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  if (p.rows == 0) return cudaSuccess;
  if (!expert_gemm_fits(p.rows, p.n, p.k, p.experts, p.dtype) || !aligned(p.in) || !aligned(p.weight)) {
    return cudaErrorInvalidValue;
  }
  if (p.dtype == DType::kBFloat16) return launch_typed<__nv_bfloat16>(p, stream);
  return launch_typed<__half>(p, stream);
}

}  // namespace mtpserve::kernels::cuda
