#include <cfloat>
#include <climits>

#include "kernels/cuda/sampling.cuh"
#include "kernels/random_stream.h"

namespace mtpserve::kernels::cuda {

namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr unsigned kFullMask = 0xffffffffu;

// One block's shared scratch; every helper ends with a barrier, so the next may reuse it.
struct Scratch {
  float best_value[kWarps];
  int best_index[kWarps];
  double warp_mass[kWarps];  // inclusive scan of the warps' masses
  int owner;                 // first thread whose chunk holds the draw's target
  int last_nonzero;          // the fallback when rounding leaves the target above every chunk
  int token;
};

struct Best {
  float value;
  int index;
};

// The larger value, the smaller index on ties: torch.argmax's first maximum.
__device__ __forceinline__ Best better(Best a, Best b) {
  return (b.value > a.value || (b.value == a.value && b.index < a.index)) ? b : a;
}

__device__ __forceinline__ Best warp_best(Best b) {
  for (int offset = 16; offset > 0; offset /= 2) {
    b = better(b, Best{__shfl_xor_sync(kFullMask, b.value, offset), __shfl_xor_sync(kFullMask, b.index, offset)});
  }
  return b;
}

// Block-wide argmax of a row, first index on ties; every thread gets it.
__device__ int block_argmax(const float* __restrict__ row, int vocab, Scratch& sh) {
  Best mine{-FLT_MAX, INT_MAX};  // an empty thread loses to any token, even at -FLT_MAX (lower index)
  for (int i = threadIdx.x; i < vocab; i += kThreads) mine = better(mine, Best{row[i], i});
  mine = warp_best(mine);
  if (threadIdx.x % 32 == 0) {
    sh.best_value[threadIdx.x / 32] = mine.value;
    sh.best_index[threadIdx.x / 32] = mine.index;
  }
  __syncthreads();
  Best best{sh.best_value[0], sh.best_index[0]};
  for (int w = 1; w < kWarps; ++w) best = better(best, Best{sh.best_value[w], sh.best_index[w]});
  __syncthreads();
  return best.index;
}

__device__ __forceinline__ double warp_inclusive_scan(double x) {
  const int lane = threadIdx.x % 32;
  for (int offset = 1; offset < 32; offset *= 2) {
    const double y = __shfl_up_sync(kFullMask, x, offset);
    if (lane >= offset) x += y;
  }
  return x;
}

struct Scan {
  double before;  // the sum over the threads before this one
  double total;
};

// Exclusive block scan of one float64 per thread. No barrier at the end: the caller's next
// barrier comes before anything rewrites warp_mass.
__device__ Scan block_exclusive_scan(double x, Scratch& sh) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const double inclusive = warp_inclusive_scan(x);
  if (lane == 31) sh.warp_mass[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    const double w = warp_inclusive_scan(lane < kWarps ? sh.warp_mass[lane] : 0.0);
    if (lane < kWarps) sh.warp_mass[lane] = w;
  }
  __syncthreads();
  const double lane_before = __shfl_up_sync(kFullMask, inclusive, 1);
  return {(warp == 0 ? 0.0 : sh.warp_mass[warp - 1]) + (lane == 0 ? 0.0 : lane_before), sh.warp_mass[kWarps - 1]};
}

// Inverse-CDF draw from a row with `excluded` (a rejected draft, or -1) removed. Each thread sums
// a contiguous chunk in float64; the chunk sums are scanned; the token is the first whose
// cumulative mass (chunk prefix + running sum in the chunk) exceeds u * total. The owner is the
// first chunk with mass whose prefix + mass exceeds the target; its walk ends at the latest on
// its last nonzero token, whose running sum is exactly that mass, so the token found has
// probability > 0. If rounding leaves the target above every chunk, the last nonzero token wins,
// as the CPU's clamp-and-back-off does.
__device__ int block_draw(const float* __restrict__ row, int vocab, int excluded, double u, Scratch& sh) {
  const int chunk = (vocab + kThreads - 1) / kThreads;
  const int begin = static_cast<int>(min(int64_t{vocab}, int64_t{chunk} * threadIdx.x));
  const int end = min(vocab, begin + chunk);
  auto prob = [&](int i) { return i == excluded ? 0.0f : row[i]; };
  if (threadIdx.x == 0) {
    sh.owner = kThreads;
    sh.last_nonzero = -1;
  }
  double mass = 0;
  int last_nonzero = -1;
  for (int i = begin; i < end; ++i) {
    const float v = prob(i);
    mass += v;
    if (v != 0.0f) last_nonzero = i;
  }
  const auto [before, total] = block_exclusive_scan(mass, sh);
  const double target = u * total;
  if (mass > 0.0 && before + mass > target) atomicMin(&sh.owner, static_cast<int>(threadIdx.x));
  if (last_nonzero >= 0) atomicMax(&sh.last_nonzero, last_nonzero);
  __syncthreads();
  if (threadIdx.x == sh.owner) {
    double running = 0;
    for (int i = begin; i < end; ++i) {
      const float v = prob(i);
      running += v;
      if (v != 0.0f && before + running > target) {
        sh.token = i;
        break;
      }
    }
  }
  __syncthreads();
  const int token = sh.owner < kThreads ? sh.token : max(sh.last_nonzero, 0);
  __syncthreads();
  return token;
}

struct Outcome {
  int64_t accepted;
  int64_t token;  // the correction after the accepted drafts, or the bonus when all were accepted
};

// The same decisions as the CPU kernel's verify(); every branch is block-uniform (all threads read
// the same inputs), which the barriers inside the helpers need.
__device__ Outcome verify(const SampleLaunch& p, int64_t s, Scratch& sh) {
  const int64_t k = p.num_drafts[s];
  const int vocab = static_cast<int>(p.vocab);
  const float* rows = p.probs + p.first_row[s] * p.vocab;
  const int64_t* drafts = p.drafts + s * p.max_drafts;
  const auto seed = static_cast<uint64_t>(p.seed[s]), first_draw = static_cast<uint64_t>(p.first_draw[s]);
  const bool greedy = p.greedy[s];
  for (int64_t j = 0; j < k; ++j) {
    const float* row = rows + j * p.vocab;
    const int64_t draft = drafts[j];
    const bool in_vocab = draft >= 0 && draft < p.vocab;
    const uint64_t n = first_draw + j;
    if (greedy) {
      const int best = block_argmax(row, vocab, sh);
      if (best != draft) return {j, best};
    } else if (!(uniform(seed, n, kAcceptStream) < (in_vocab ? row[draft] : 0.0f))) {
      const int excluded = in_vocab ? static_cast<int>(draft) : -1;
      return {j, block_draw(row, vocab, excluded, uniform(seed, n, kResampleStream), sh)};
    }
  }
  const float* last = rows + k * p.vocab;
  return {k, greedy ? block_argmax(last, vocab, sh)
                    : block_draw(last, vocab, -1, uniform(seed, first_draw + k, kDrawStream), sh)};
}

// Three blocks per SM: 40 registers, no spills (512 threads alone made ptxas aim at 32 and spill).
__global__ void __launch_bounds__(kThreads, 3) sample_and_verify_kernel(const SampleLaunch p) {
  __shared__ Scratch sh;
  const int64_t s = blockIdx.x;
  const int64_t k = p.num_drafts[s], first_row = p.first_row[s];
  const bool in_range = k >= 0 && k <= p.max_drafts && first_row >= 0 && first_row + k < p.rows;
  const Outcome o = in_range ? verify(p, s, sh) : Outcome{0, -1};
  if (threadIdx.x != 0) return;
  int64_t* out = p.tokens + s * (p.max_drafts + 1);
  const int64_t* drafts = p.drafts + s * p.max_drafts;
  for (int64_t j = 0; j <= p.max_drafts; ++j) out[j] = j < o.accepted ? drafts[j] : j == o.accepted ? o.token : -1;
  p.accepted[s] = o.accepted;
}

}  // namespace

cudaError_t launch_sample_and_verify(const SampleLaunch& p, cudaStream_t stream) {
  if (p.seqs == 0) return cudaSuccess;
  sample_and_verify_kernel<<<static_cast<unsigned>(p.seqs), kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace mtpserve::kernels::cuda
