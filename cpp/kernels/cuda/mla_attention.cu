#include "kernels/cuda/mla_attention.cuh"

#include "kernels/cuda/device_info.cuh"
#include "kernels/cuda/mla_attention_tile.cuh"
#include "kernels/cuda/mla_attention_wgmma.cuh"
#include "kernels/cuda/split_combine.cuh"

#include <algorithm>
#include <climits>
#include <cmath>
#include <type_traits>

namespace mtpserve::kernels::cuda {

namespace {

using namespace mla_tile;

// Barrier for the two warps (64 threads) of row group g: ids 1-4 (0 is __syncthreads'). Immediate ids
// let ptxas reserve 5 barriers instead of all 16; the memory clobber keeps shared loads and stores on
// their side of it.
__device__ __forceinline__ void pair_barrier(int g) {
  switch (g) {
    case 0: asm volatile("bar.sync 1, 64;\n" ::: "memory"); break;
    case 1: asm volatile("bar.sync 2, 64;\n" ::: "memory"); break;
    case 2: asm volatile("bar.sync 3, 64;\n" ::: "memory"); break;
    default: asm volatile("bar.sync 4, 64;\n" ::: "memory"); break;
  }
}

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// d += a (16x16, row) * b (16x8, col), fp32 accumulate.
template <typename T>
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
template <>
__device__ __forceinline__ void mma16816<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                                        uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma16816<__half>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ---------------------------------------------------------------------------------------------
// Tensor-core kernel. 8 warps; warp w = (g = w & 3, half = w >> 2) owns entries [16g, 16g + 16) and
// value columns [half * KV / 2, (half + 1) * KV / 2). Per 32-token KV tile, S = Q K^T for the warp's
// 16 entries x 32 tokens is split over the pair's two warps by the reduction dim (half each) and summed
// through shared memory, so both warps hold the same full S rows: they run identical online-softmax
// arithmetic (bit-identical m and l) and feed P to O += P V straight from registers.

template <int KV, int ROPE>
struct MmaShape {
  static constexpr int kDim = KV + ROPE;
  static constexpr int kStride = kDim + 8;  // an odd number of 16-byte chunks per row: ldmatrix without bank conflicts
  static constexpr int kChunks = kDim / 8;  // 16-byte chunks per row
  static constexpr int kKSteps = kDim / 16;
  static constexpr int kKStepsLow = (kKSteps + 1) / 2;  // reduction steps of the pair's half-0 warp
  static constexpr int kTokens = 32;                    // KV tile
  static constexpr int kStages = 3;
  static constexpr int kOTiles = KV / 2 / 8;  // n8 tiles of the warp's value columns
  static constexpr int kThreads = 256;
  static constexpr size_t kExchangeBytes = 8 * 32 * 16 * sizeof(float);
  static constexpr size_t kSmemBytes =
      static_cast<size_t>(kTileEntries + kStages * kTokens) * kStride * 2 + kExchangeBytes;
  static_assert(kDim % 16 == 0 && (KV / 2) % 16 == 0, "MMA tiles need 16-multiples");
  static_assert(kSmemBytes <= 227 * 1024, "shared memory");
};

// Copies 32 cache rows starting at position `start` into a stage; rows at or past `end` are zeroed.
template <typename T, int KV, int ROPE>
__device__ __forceinline__ void load_kv_tile(T* dst, const T* cache, const int32_t* table, int block_size, int start,
                                             int end, int warp, int lane) {
  using S = MmaShape<KV, ROPE>;
  for (int j = warp; j < S::kTokens; j += 8) {
    const int pos = start + j;
    const bool valid = pos < end;
    const T* src = cache;
    if (valid) src += (static_cast<int64_t>(table[pos / block_size]) * block_size + pos % block_size) * S::kDim;
    for (int c = lane; c < S::kChunks; c += 32) cp_async16(dst + j * S::kStride + c * 8, src + c * 8, valid);
  }
}

template <typename T, int KV, int ROPE>
__global__ void __launch_bounds__(256, 1) mla_attention_mma_kernel(MlaAttentionLaunch p) {
  using S = MmaShape<KV, ROPE>;
  TileWork w;
  if (!tile_work(p, w)) return;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = warp & 3, half = warp >> 2, tq = lane & 3;

  if (w.begin >= w.end && p.splits > 1) {  // nothing visible in this split: it contributes nothing
    mark_empty_split(p, w);
    return;
  }

  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* sq = reinterpret_cast<T*>(smem_raw);
  T* skv = sq + kTileEntries * S::kStride;
  float4* exchange = reinterpret_cast<float4*>(skv + S::kStages * S::kTokens * S::kStride);

  const T* cache = static_cast<const T*>(p.cache);
  const int32_t* table = p.block_tables + static_cast<int64_t>(blockIdx.x) * p.table_width;
  const int block_size = static_cast<int>(p.block_size);
  const int num_tiles = static_cast<int>(ceil_div(w.end - w.begin, S::kTokens));

  // Q tile (padding entries zeroed) joins the first KV tile's copy group.
  const T* q = static_cast<const T*>(p.q) + w.out_row * S::kDim;
  for (int r = warp; r < kTileEntries; r += 8) {
    const bool valid = r < w.count;
    const T* src = valid ? q + r * S::kDim : q;
    for (int c = lane; c < S::kChunks; c += 32) cp_async16(sq + r * S::kStride + c * 8, src + c * 8, valid);
  }
#pragma unroll
  for (int st = 0; st < S::kStages - 1; ++st) {
    if (st < num_tiles) {
      load_kv_tile<T, KV, ROPE>(skv + st * S::kTokens * S::kStride, cache, table, block_size,
                                w.begin + st * S::kTokens, w.end, warp, lane);
    }
    cp_async_commit();
  }

  int limit[2];
  row_limits(p, w, 16 * g, limit);
  const float scale_log2 = p.scale * kLog2e;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  float o[S::kOTiles][4];
#pragma unroll
  for (int i = 0; i < S::kOTiles; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;

  const int k_first = half == 0 ? 0 : S::kKStepsLow;
  const int k_count = half == 0 ? S::kKStepsLow : S::kKSteps - S::kKStepsLow;
  const uint32_t q_base = smem_addr(sq + (16 * g + (lane & 15)) * S::kStride + (lane >> 4) * 8 + k_first * 16);
  // K as the col-major B of S = Q K^T: matrices (tokens 0-7 | 8-15) x (dims +0 | +8), one n8 pair per x4.
  const int k_lane_off = ((lane & 7) + ((lane >> 4) << 3)) * S::kStride + ((lane >> 3) & 1) * 8 + k_first * 16;
  // V as the B of O = P V via ldmatrix.trans: matrices (tokens 0-7 | 8-15) x (cols +0 | +8).
  const int v_lane_off = ((lane & 7) + ((lane >> 3) & 1) * 8) * S::kStride + half * (KV / 2) + (lane >> 4) * 8;
  float4* my_exchange = exchange + warp * 128;
  const float4* partner_exchange = exchange + (warp ^ 4) * 128;

  for (int t = 0; t < num_tiles; ++t) {
    cp_async_wait<S::kStages - 2>();
    __syncthreads();  // tile t visible to all; every warp is done with the stage refilled below
    if (t + S::kStages - 1 < num_tiles) {
      load_kv_tile<T, KV, ROPE>(skv + ((t + S::kStages - 1) % S::kStages) * S::kTokens * S::kStride, cache, table,
                                block_size, w.begin + (t + S::kStages - 1) * S::kTokens, w.end, warp, lane);
    }
    cp_async_commit();
    const T* kv = skv + (t % S::kStages) * S::kTokens * S::kStride;

    float s[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
    const uint32_t k_base = smem_addr(kv + k_lane_off);
#pragma unroll 4
    for (int ks = 0; ks < k_count; ++ks) {
      uint32_t a[4];
      ldsm_x4(a, q_base + ks * 32);
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        uint32_t b[4];
        ldsm_x4(b, k_base + (j * 16 * S::kStride) * 2 + ks * 32);
        mma16816<T>(s[2 * j], a, b[0], b[1]);
        mma16816<T>(s[2 * j + 1], a, b[2], b[3]);
      }
    }

    // Sum the pair's halves of the reduction: the partner's lane holds the same fragment positions.
#pragma unroll
    for (int i = 0; i < 4; ++i) my_exchange[i * 32 + lane] = make_float4(s[i][0], s[i][1], s[i][2], s[i][3]);
    pair_barrier(g);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float4 x = partner_exchange[i * 32 + lane];
      s[i][0] += x.x;
      s[i][1] += x.y;
      s[i][2] += x.z;
      s[i][3] += x.w;
    }

    float alpha[2];
    online_softmax(s, w.begin + t * S::kTokens, w.end, limit, scale_log2, tq, m, l, alpha);
#pragma unroll
    for (int i = 0; i < S::kOTiles; ++i) {
      o[i][0] *= alpha[0];
      o[i][1] *= alpha[0];
      o[i][2] *= alpha[1];
      o[i][3] *= alpha[1];
    }

#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
      uint32_t pa[4];
      p_fragment<T>(s, kk, pa);
      const uint32_t v_base = smem_addr(kv + v_lane_off + kk * 16 * S::kStride);
#pragma unroll
      for (int np = 0; np < S::kOTiles / 2; ++np) {
        uint32_t b[4];
        ldsm_x4_trans(b, v_base + np * 16 * 2);
        mma16816<T>(o[2 * np], pa, b[0], b[1]);
        mma16816<T>(o[2 * np + 1], pa, b[2], b[3]);
      }
    }
  }
  cp_async_wait<0>();
  store_rows<T, KV, S::kOTiles>(p, w, 16 * g, half * (KV / 2) + 2 * tq, o, m, l, half == 0 && tq == 0);
}

// ---------------------------------------------------------------------------------------------
// Split combine (split_combine.cuh): one thread per entry row and 4 value columns. Each thread loads every split's
// partial of its columns, and a warp per row of the block every split's lse of that row (a lane each), before any
// is used: one round trip to L2 for all of them (the partials of splits with nothing visible are loaded too, and
// weigh 0). The kernel is built for at most N splits (8, 16 or 32), so that its registers hold no more partials
// than the launch has. Its blocks are as small as it takes to spread the launch over the SMs
// (combine_launch_shape): a decode step at batch 1 has 16 rows of 128 threads, which blocks of 256 put on 8 SMs.
// At batch 1 (32 splits) the kernel is latency-bound, one warp's instruction stream long: it took 6.6 us on an
// H200 with one thread working out each row's 32 weights, 3.5 us with a lane per split (docs/benchmarks.md).

constexpr int kCombineThreads = 256;

// A combine launch's blocks of `threads`: each takes `rows` entry rows, or one row's `row_threads` x 4 columns
// where a row has more threads than the block (its columns then spread over `slices` blocks along y).
struct CombineShape {
  int threads, row_threads, rows, slices;
  int64_t row_blocks;  // along x
};

__host__ __device__ inline CombineShape combine_shape(const MlaAttentionLaunch& p, int threads) {
  const int groups = static_cast<int>(p.kv_lora / 4);  // a whole row's threads (kv_lora 512 or 64 where split)
  const int row_threads = groups < threads ? groups : threads;
  const int rows = threads / row_threads;
  return {threads, row_threads, rows, groups / row_threads, ceil_div(p.tokens * p.heads, rows)};
}

template <typename T, int N>
__global__ void __launch_bounds__(kCombineThreads) mla_combine_kernel(MlaAttentionLaunch p) {
  extern __shared__ float combine_smem[];  // [rows][splits] weights, then [rows] 1 / their sums
  const CombineShape shape = combine_shape(p, static_cast<int>(blockDim.x));
  const int64_t first = static_cast<int64_t>(blockIdx.x) * shape.rows, rows_total = p.tokens * p.heads;
  float* inv = combine_smem + shape.rows * p.splits;
  const int r = threadIdx.x / shape.row_threads;
  const int col = (static_cast<int>(blockIdx.y) * shape.row_threads + threadIdx.x % shape.row_threads) * 4;
  const int64_t row = first + r;
  const bool active = row < rows_total;
  float4 x[N][1];
  const split_combine::GlobalPartials partials(p, active ? row : 0);
  split_combine::load_partials(active ? p.splits : 0, [&](int z, int c) { return partials.at(z, c); }, col, 0, x);
  const int warps = static_cast<int>(blockDim.x >> 5), warp = static_cast<int>(threadIdx.x >> 5);
  for (int w = warp; w < shape.rows && first + w < rows_total; w += warps) {
    const auto lse = [&](int z) { return split_combine::global_lse(p, z, first + w); };
    const float row_inv = split_combine::warp_weights(p.splits, lse, combine_smem + w * p.splits);
    if ((threadIdx.x & 31) == 0) inv[w] = row_inv;
  }
  __syncthreads();
  if (!active) return;
  split_combine::store_combined<T>(p.splits, x, combine_smem + r * p.splits, inv[r],
                                   static_cast<T*>(p.out) + row * p.kv_lora, col, 0);
}

// ---------------------------------------------------------------------------------------------
// SIMT kernel (fp32 arithmetic throughout, no tensor cores): one block per entry. Each 128-position chunk:
// a thread scores one position, the block takes the chunk's max and sum, then each thread accumulates
// its value columns over the chunk. Accurate to fp32 rounding; used for fp32 and unusual shapes.

constexpr int kSimtThreads = 128;

__device__ float block_reduce(float v, bool is_max, float* scratch) {
  for (int d = 16; d > 0; d /= 2) {
    const float x = __shfl_xor_sync(0xffffffffu, v, d);
    v = is_max ? fmaxf(v, x) : v + x;
  }
  const int warp = threadIdx.x >> 5;
  __syncthreads();  // scratch is free again
  if ((threadIdx.x & 31) == 0) scratch[warp] = v;
  __syncthreads();
  v = scratch[0];
  for (int i = 1; i < kSimtThreads / 32; ++i) v = is_max ? fmaxf(v, scratch[i]) : v + scratch[i];
  return v;
}

template <typename T>
__global__ void __launch_bounds__(kSimtThreads) mla_attention_simt_kernel(MlaAttentionLaunch p) {
  const int s = blockIdx.y, entry = blockIdx.x;
  const int q0 = p.query_start[s], q_len = p.query_start[s + 1] - q0;
  const int heads = static_cast<int>(p.heads);
  if (entry >= q_len * heads) return;
  const int dim = static_cast<int>(p.dim), kv = static_cast<int>(p.kv_lora);
  const int context = p.context_lens[s];
  const int visible = max(0, min(context, context - q_len + entry / heads + 1));
  const int64_t out_row = static_cast<int64_t>(q0) * heads + entry;

  extern __shared__ __align__(16) unsigned char smem_raw[];
  int64_t* rows = reinterpret_cast<int64_t*>(smem_raw);      // [kSimtThreads] cache row of each chunk position
  float* prob = reinterpret_cast<float*>(rows + kSimtThreads);  // [kSimtThreads]
  float* scratch = prob + kSimtThreads;                        // [kSimtThreads / 32]
  float* sq = scratch + kSimtThreads / 32;                     // [dim]
  float* acc = sq + dim;                                       // [kv]

  const T* q = static_cast<const T*>(p.q) + out_row * dim;
  const T* cache = static_cast<const T*>(p.cache);
  const int32_t* table = p.block_tables + static_cast<int64_t>(s) * p.table_width;
  for (int d = threadIdx.x; d < dim; d += kSimtThreads) sq[d] = to_float(q[d]);
  for (int c = threadIdx.x; c < kv; c += kSimtThreads) acc[c] = 0.0f;
  __syncthreads();

  float m = -INFINITY, l = 0.0f;
  for (int start = 0; start < visible; start += kSimtThreads) {
    const int pos = start + threadIdx.x;
    float score = -INFINITY;
    if (pos < visible) {
      const int64_t row = static_cast<int64_t>(table[pos / p.block_size]) * p.block_size + pos % p.block_size;
      const T* k = cache + row * dim;
      float dot = 0.0f;
      for (int d = 0; d < dim; ++d) dot = fmaf(sq[d], to_float(k[d]), dot);
      score = dot * p.scale;
      rows[threadIdx.x] = row;
    }
    const float m_new = fmaxf(m, block_reduce(score, true, scratch));  // finite: position `start` is visible
    const float pr = pos < visible ? expf(score - m_new) : 0.0f;
    prob[threadIdx.x] = pr;
    const float alpha = expf(m - m_new);
    l = l * alpha + block_reduce(pr, false, scratch);  // its barriers also publish prob and rows
    m = m_new;
    const int n = min(kSimtThreads, visible - start);
    for (int c = threadIdx.x; c < kv; c += kSimtThreads) {
      float a = acc[c] * alpha;
      for (int j = 0; j < n; ++j) a = fmaf(prob[j], to_float(cache[rows[j] * dim + c]), a);
      acc[c] = a;
    }
    __syncthreads();  // prob and rows are rewritten by the next chunk
  }
  T* out = static_cast<T*>(p.out) + out_row * kv;
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  for (int c = threadIdx.x; c < kv; c += kSimtThreads) out[c] = from_float<T>(acc[c] * inv);
}

// ---------------------------------------------------------------------------------------------
// Host side.

bool uses_mma(const MlaAttentionLaunch& p) {
  if (p.dtype == DType::kFloat32) return false;
  const bool shape = (p.kv_lora == 512 && p.dim == 576) || (p.kv_lora == 64 && p.dim == 80);
  const bool aligned = reinterpret_cast<uintptr_t>(p.q) % 16 == 0 && reinterpret_cast<uintptr_t>(p.cache) % 16 == 0;
  return shape && aligned;
}

int64_t max_tiles(const MlaAttentionLaunch& p) { return ceil_div(p.max_query_len * p.heads, kTileEntries); }

template <typename T, int KV, int ROPE>
cudaError_t launch_mma(const MlaAttentionLaunch& p, cudaStream_t stream) {
  using S = MmaShape<KV, ROPE>;
  cudaError_t status = allow_smem<mla_attention_mma_kernel<T, KV, ROPE>>(S::kSmemBytes);
  if (status != cudaSuccess) return status;
  const dim3 grid(static_cast<unsigned>(p.num_seqs), static_cast<unsigned>(max_tiles(p)),
                  static_cast<unsigned>(p.splits));
  mla_attention_mma_kernel<T, KV, ROPE><<<grid, S::kThreads, S::kSmemBytes, stream>>>(p);
  return cudaGetLastError();
}

// Halves the blocks from kCombineThreads (down to a warp) while the launch has fewer blocks than the device SMs.
CombineShape combine_launch_shape(const MlaAttentionLaunch& p) {
  const int sm_count = current_multiprocessor_count();
  CombineShape shape = combine_shape(p, kCombineThreads);
  while (shape.threads > 32 && shape.row_blocks * shape.slices < sm_count) {
    shape = combine_shape(p, shape.threads / 2);
  }
  return shape;
}

template <typename T>
cudaError_t launch_combine(const MlaAttentionLaunch& p, cudaStream_t stream) {
  const CombineShape shape = combine_launch_shape(p);
  const dim3 grid(static_cast<unsigned>(shape.row_blocks), static_cast<unsigned>(shape.slices));
  const size_t smem = shape.rows * (p.splits + 1) * sizeof(float);
  static_assert(kMaxSplits == 32, "the combine kernel's builds cover 8, 16 and 32 splits");
  if (p.splits <= 8) {
    mla_combine_kernel<T, 8><<<grid, shape.threads, smem, stream>>>(p);
  } else if (p.splits <= 16) {
    mla_combine_kernel<T, 16><<<grid, shape.threads, smem, stream>>>(p);
  } else {
    mla_combine_kernel<T, kMaxSplits><<<grid, shape.threads, smem, stream>>>(p);
  }
  return cudaGetLastError();
}

// The tensor-core pass (wgmma on Hopper at the 512 + 64 shape, mma.sync otherwise), then the combine.
template <typename T>
cudaError_t launch_tensor_core(const MlaAttentionLaunch& p, cudaStream_t stream) {
  cudaError_t status;
  bool combined = false;
  if (wgmma_attention_shape(p) && sm90a_device()) {
    status = launch_mla_attention_wgmma(p, stream, combined);
  } else {
    status = p.kv_lora == 512 ? launch_mma<T, 512, 64>(p, stream) : launch_mma<T, 64, 16>(p, stream);
  }
  if (status != cudaSuccess || p.splits == 1 || combined) return status;
  return launch_combine<T>(p, stream);
}

template <typename T>
cudaError_t launch_simt(const MlaAttentionLaunch& p, cudaStream_t stream) {
  auto kernel = mla_attention_simt_kernel<T>;
  const size_t smem =
      kSimtThreads * sizeof(int64_t) + (kSimtThreads + kSimtThreads / 32 + p.dim + p.kv_lora) * sizeof(float);
  if (smem > 48 * 1024) {
    const cudaError_t status = allow_smem<mla_attention_simt_kernel<T>>(smem);
    if (status != cudaSuccess) return status;
  }
  const dim3 grid(static_cast<unsigned>(p.max_query_len * p.heads), static_cast<unsigned>(p.num_seqs));
  kernel<<<grid, kSimtThreads, smem, stream>>>(p);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_typed(const MlaAttentionLaunch& p, cudaStream_t stream) {
  if constexpr (!std::is_same_v<T, float>) {
    if (uses_mma(p)) return launch_tensor_core<T>(p, stream);
  }
  return launch_simt<T>(p, stream);
}

}  // namespace

int mla_attention_splits(const MlaAttentionLaunch& p, int64_t max_context_len, int sm_count) {
  if (!uses_mma(p) || max_context_len < 2 * kMinSplitTokens) return 1;
  // Blocks resident per SM: one (200 KB of shared memory) at kv_lora 512; two for the small shape (registers).
  const int64_t slots = static_cast<int64_t>(sm_count) * (p.kv_lora == 512 ? 1 : 2);
  const int64_t blocks = std::max<int64_t>(1, p.num_seqs * max_tiles(p));
  const int64_t most = std::min<int64_t>(kMaxSplits, max_context_len / kMinSplitTokens);
  // Time ~ waves x (tokens per split + the split's partial-output write and combine read, which cost
  // about as much as kSplitOverheadTokens KV rows), minimised over the split count: this weighs the
  // tail of a partial last wave, which a fixed "two waves" rule ignores.
  int best = 1;
  int64_t best_cost = INT64_MAX;
  for (int64_t splits = 1; splits <= most; ++splits) {
    const int64_t tokens = ceil_div(ceil_div(max_context_len, splits), kSplitAlign) * kSplitAlign;
    const int64_t cost = ceil_div(blocks * splits, slots) * (tokens + (splits > 1 ? kSplitOverheadTokens : 0));
    if (cost < best_cost) {
      best = static_cast<int>(splits);
      best_cost = cost;
    }
  }
  return best;
}

void fixed_kv_splits(MlaAttentionLaunch& p, int64_t max_context_len, int64_t cache_rows) {
  p.splits = 1;
  p.split_tokens = 0;
  if (!uses_mma(p)) return;  // the SIMT kernel walks every row's KV in one order already
  const int64_t span = ceil_div(std::max<int64_t>(cache_rows, 1), kMaxSplits);
  p.split_tokens = static_cast<int32_t>(std::max<int64_t>(kMinSplitTokens, ceil_div(span, kSplitAlign) * kSplitAlign));
  p.splits = static_cast<int32_t>(std::clamp<int64_t>(ceil_div(max_context_len, p.split_tokens), 1, kMaxSplits));
}

cudaError_t launch_mla_attention(const MlaAttentionLaunch& p, cudaStream_t stream) {
  if (p.num_seqs == 0 || p.max_query_len == 0 || p.tokens == 0) return cudaSuccess;
  if (p.splits < 1 || p.splits > kMaxSplits || (p.splits > 1 && !uses_mma(p))) return cudaErrorInvalidValue;
  return dispatch(p.dtype, [&](auto t) { return launch_typed<decltype(t)>(p, stream); });
}

}  // namespace mtpserve::kernels::cuda
