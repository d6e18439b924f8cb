#include "kernels/cuda/mla_attention_wgmma.cuh"

#include "kernels/cuda/mla_attention_tile.cuh"

namespace mtpserve::kernels::cuda {

namespace {

using namespace mla_tile;

// ---------------------------------------------------------------------------------------------
// Shapes. A block's 64 entries are wgmma's M; the 576 dims lie in nine 64-wide slabs of 128-byte rows,
// 16-byte chunks swizzled by the row (the 128-byte swizzle wgmma reads without bank conflicts), so
// each slab is a run of 8-row x 128-byte atoms at 1024-byte alignment.

constexpr int kDim = 576, kKv = 512, kSlabs = kDim / 64;
constexpr int kTokens = 32;              // KV tile
constexpr int kStages = 3;
constexpr int kThreads = 256;            // two warpgroups
constexpr int kQSlabBytes = kTileEntries * 128;
constexpr int kKvSlabBytes = kTokens * 128;
constexpr int kQBytes = kSlabs * kQSlabBytes;
constexpr int kStageBytes = kSlabs * kKvSlabBytes;
constexpr int kExchangeBytes = 2 * 16 * 128 * 4;  // each warpgroup's 64 x 32 fp32 partial S
constexpr size_t kSmemBytes = kQBytes + kStages * kStageBytes + kExchangeBytes + 1024;  // + the atoms' alignment
static_assert(kSmemBytes <= 227 * 1024, "shared memory");

// The device code exists only in the sm_90a pass (wgmma); the plain sm_90 pass gets a kernel that traps,
// which sm90a_device() keeps from being launched.
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)

constexpr int kChunksPerRow = kDim / 8;  // 16-byte chunks
constexpr int kKSteps = kDim / 16;       // k16 steps of S = Q K^T
constexpr int kColsPerGroup = kKv / 2;   // value columns of each warpgroup's O

// Byte offset of 16-byte chunk c of row `row` in a region whose slabs hold `slab_bytes` each.
__device__ __forceinline__ uint32_t swizzled(int row, int c, int slab_bytes) {
  return (c >> 3) * slab_bytes + row * 128 + (((c & 7) ^ (row & 7)) << 4);
}

// ---------------------------------------------------------------------------------------------
// wgmma (PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"). The descriptor names a
// 128-byte-swizzled operand: start address, leading and stride byte offsets (each >> 4), swizzle 1.
// K-major operands (Q, K) step 8-row groups by 1024 bytes; the MN-major V of one 64-column atom steps its
// 8-token groups by 1024 bytes too, so both offsets are 1024 there and the layout is the same whichever
// the hardware reads.

__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t leading, uint32_t stride) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(leading >> 4) << 16) |
         (static_cast<uint64_t>(stride >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }

// Keeps the compiler from moving accumulator reads and writes across the asynchronous wgmma.
template <int N>
__device__ __forceinline__ void fence_operands(float (&r)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i) {
#pragma unroll
    for (int c = 0; c < 4; ++c) asm volatile("" : "+f"(r[i][c])::"memory");
  }
}

#define MTPSERVE_ACC16(d)                                                                                    \
  "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), \
      "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), \
      "+f"(d[3][2]), "+f"(d[3][3])
#define MTPSERVE_ACC32(d) MTPSERVE_ACC16(d), MTPSERVE_ACC16((d + 4))

#define MTPSERVE_WGMMA_QK(TYPE)                                                                             \
  asm volatile(                                                                                             \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"                                                          \
      "wgmma.mma_async.sync.aligned.m64n32k16.f32." TYPE "." TYPE " "                                      \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, 0, 0;\n}\n" \
      : MTPSERVE_ACC16(d)                                                                                   \
      : "l"(a), "l"(b), "r"(accumulate))

// d (64 x 32) (+)= A (64 x 16, K-major in shared memory) * B (16 x 32, K-major in shared memory).
template <typename T>
__device__ __forceinline__ void wgmma_qk(float (&d)[4][4], uint64_t a, uint64_t b, int accumulate) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    MTPSERVE_WGMMA_QK("bf16");
  } else {
    MTPSERVE_WGMMA_QK("f16");
  }
}

#define MTPSERVE_WGMMA_PV(TYPE)                                                                              \
  asm volatile(                                                                                              \
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                                             \
      "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " "                                       \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, " \
      "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"     \
      : MTPSERVE_ACC32(d)                                                                                    \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b))

// d (64 x 64) += A (64 x 16, registers) * B (16 x 64, MN-major in shared memory).
template <typename T>
__device__ __forceinline__ void wgmma_pv(float (*d)[4], const uint32_t (&a)[4], uint64_t b) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    MTPSERVE_WGMMA_PV("bf16");
  } else {
    MTPSERVE_WGMMA_PV("f16");
  }
}

// S (64 x 32) (+)= Q K^T over k16 steps [kFirst, kFirst + kKSteps / 2) of the 576 dims, from descriptors of Q's
// and the KV stage's first slab: every step's descriptor is a compile-time offset from those (the address
// field is the low 14 bits of byte address / 16 and shared memory stays below 256 KB, so adding never carries
// out of it), which keeps the per-step work to uniform-register adds.
template <typename T, int kFirst>
__device__ __forceinline__ void issue_scores(float (&s)[4][4], uint64_t q_desc, uint64_t kv_desc) {
#pragma unroll
  for (int h = 0; h < kKSteps / 2; ++h) {
    constexpr int kSlabStep = 4;  // k16 steps per 128-byte swizzle row
    const int ks = kFirst + h;
    const uint32_t within = (ks % kSlabStep) * 32;
    wgmma_qk<T>(s, q_desc + (((ks / kSlabStep) * kQSlabBytes + within) >> 4),
                kv_desc + (((ks / kSlabStep) * kKvSlabBytes + within) >> 4), h > 0);
  }
}

// Thread i copies row i / 8 of a tile, 16-byte chunks i % 8 + 8m of it (m = 0..8: one per slab), so
// eight threads read a row's 1152 contiguous bytes and the swizzled destination is fixed per thread.
constexpr int kRowThreads = 8;
static_assert(kThreads == kTokens * kRowThreads, "one tile row per eight threads");

// The cache row of position `pos`, or -1 at or past `end`. Read one tile ahead of its copy, so the
// block-table load is off the tile's critical path. `block_shift` >= 0 says block_size is 2^block_shift (the
// usual sizes): a shift instead of an integer division, which costs some 40 instructions a tile.
__device__ __forceinline__ int64_t cache_row(const int32_t* table, int block_size, int block_shift, int pos, int end) {
  if (pos >= end) return -1;
  const int block = block_shift >= 0 ? pos >> block_shift : pos / block_size;
  return static_cast<int64_t>(table[block]) * block_size + (pos - block * block_size);
}

// Copies cache row `cache_index` (zeros for -1) into this thread's chunks of a stage row.
template <typename T>
__device__ __forceinline__ void load_kv_row(unsigned char* stage_row, const T* cache, int64_t cache_index) {
  const bool valid = cache_index >= 0;
  const T* src = cache + (threadIdx.x % kRowThreads) * 8 + (valid ? cache_index * kDim : 0);
#pragma unroll
  for (int m = 0; m < kSlabs; ++m) cp_async16(stage_row + m * kKvSlabBytes, src + m * 64, valid);
}

// ---------------------------------------------------------------------------------------------
// Two warpgroups. For each 32-token tile, warpgroup h computes S = Q K^T (64 x 32, both operands from
// shared memory) over half the 576 dims, the halves are summed through shared memory (a + b and b + a:
// the same float), and both run the same online softmax on the sum, so both hold bit-identical P, m and
// l; warpgroup h then accumulates O for value columns [256h, 256h + 256) from P in registers and V in
// shared memory. Warp w of a warpgroup owns entries [16w, 16w + 16) throughout.

template <typename T>
__global__ void __launch_bounds__(kThreads, 1) mla_attention_wgmma_kernel(MlaAttentionLaunch p) {
  TileWork w;
  if (!tile_work(p, w)) return;
  const int64_t rows_total = p.tokens * p.heads;
  if (w.begin >= w.end && p.splits > 1) {  // nothing visible in this split: it contributes nothing
    for (int r = threadIdx.x; r < w.count; r += blockDim.x) p.lse[blockIdx.z * rows_total + w.out_row + r] = -INFINITY;
    return;
  }
  // The warpgroup, broadcast from lane 0 so the compiler knows it is warp-uniform and keeps what derives from
  // it (the wgmma descriptors) in uniform registers.
  const int group = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x >> 7), 0);
  const int warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
  const int lane_in_group = threadIdx.x & 127;
  const int tq = lane & 3;

  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* sq = smem_raw + (1024 - smem_addr(smem_raw) % 1024) % 1024;
  unsigned char* skv = sq + kQBytes;
  float4* exchange = reinterpret_cast<float4*>(skv + kStages * kStageBytes);  // [group][4][128 threads]
  const uint32_t q_addr = smem_addr(sq), kv_addr = smem_addr(skv);
  const int row = threadIdx.x / kRowThreads;  // the tile row this thread copies
  const uint32_t row_offset = row * 128 + (((threadIdx.x % kRowThreads) ^ (row & 7)) << 4);

  const T* cache = static_cast<const T*>(p.cache);
  const int32_t* table = p.block_tables + static_cast<int64_t>(blockIdx.x) * p.table_width;
  const int block_size = static_cast<int>(p.block_size);
  const int block_shift = (block_size & (block_size - 1)) == 0 ? __ffs(block_size) - 1 : -1;
  const int num_tiles = static_cast<int>(ceil_div(w.end - w.begin, kTokens));

  // The Q tile (padding entries zeroed) joins the first KV tile's copy group.
  const T* q = static_cast<const T*>(p.q) + w.out_row * kDim;
  for (int i = threadIdx.x; i < kTileEntries * kChunksPerRow; i += kThreads) {
    const int r = i / kChunksPerRow, c = i % kChunksPerRow;
    const bool valid = r < w.count;
    cp_async16(sq + swizzled(r, c, kQSlabBytes), q + (valid ? r : 0) * kDim + c * 8, valid);
  }
  const auto tile_row = [&](int tile) { return cache_row(table, block_size, block_shift, w.begin + tile * kTokens + row, w.end); };
#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) {
    if (st < num_tiles) load_kv_row<T>(skv + st * kStageBytes + row_offset, cache, tile_row(st));
    cp_async_commit();
  }
  int64_t next_row = tile_row(kStages - 1);  // the next tile to copy

  int limit[2];
  row_limits(p, w, 16 * warp, limit);
  const float scale_log2 = p.scale * kLog2e;
  const uint64_t v_desc = smem_desc(kv_addr + group * 4 * kKvSlabBytes, 1024, 1024);  // this warpgroup's V columns
  const uint64_t q_desc = smem_desc(q_addr, 16, 1024);
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  float o[4 * 8][4];  // four 64-column accumulators of m64n64, 8 n8 tiles each
#pragma unroll
  for (int i = 0; i < 32; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;

  for (int t = 0; t < num_tiles; ++t) {
    cp_async_wait<kStages - 2>();
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // cp.async writes, read by wgmma
    __syncthreads();  // tile t visible to all; every wgmma on the stage refilled below has completed
    if (t + kStages - 1 < num_tiles) {
      load_kv_row<T>(skv + ((t + kStages - 1) % kStages) * kStageBytes + row_offset, cache, next_row);
      next_row = tile_row(t + kStages);
    }
    cp_async_commit();
    const uint32_t stage = (t % kStages) * kStageBytes;

    float s[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
    wgmma_fence();
    const uint64_t kv_desc = smem_desc(kv_addr + stage, 16, 1024);
    if (group == 0) {
      issue_scores<T, 0>(s, q_desc, kv_desc);
    } else {
      issue_scores<T, kKSteps / 2>(s, q_desc, kv_desc);
    }
    wgmma_commit();
    wgmma_wait();
    fence_operands(s);
    // The partner thread (same index in the other warpgroup) holds the same fragment positions.
#pragma unroll
    for (int i = 0; i < 4; ++i) exchange[(group * 4 + i) * 128 + lane_in_group] = make_float4(s[i][0], s[i][1], s[i][2], s[i][3]);
    __syncthreads();
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float4 x = exchange[((group ^ 1) * 4 + i) * 128 + lane_in_group];
      s[i][0] += x.x;
      s[i][1] += x.y;
      s[i][2] += x.z;
      s[i][3] += x.w;
    }

    float alpha[2];
    online_softmax(s, w.begin + t * kTokens, w.end, limit, scale_log2, tq, m, l, alpha);
    if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) {  // the maxima moved: rescale O
#pragma unroll
      for (int i = 0; i < 32; ++i) {
        o[i][0] *= alpha[0];
        o[i][1] *= alpha[0];
        o[i][2] *= alpha[1];
        o[i][3] *= alpha[1];
      }
    }
    fence_operands(o);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kTokens / 16; ++kk) {
      uint32_t pa[4];
      p_fragment<T>(s, kk, pa);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        wgmma_pv<T>(o + 8 * j, pa, v_desc + ((stage + j * kKvSlabBytes + kk * 16 * 128) >> 4));
      }
    }
    wgmma_commit();
    wgmma_wait();
    fence_operands(o);
  }
  cp_async_wait<0>();
  store_rows<T, kKv, 32>(p, w, 16 * warp, group * kColsPerGroup + 2 * tq, o, m, l, group == 0 && tq == 0);
}

#else

template <typename T>
__global__ void __launch_bounds__(kThreads, 1) mla_attention_wgmma_kernel(MlaAttentionLaunch) {
  __trap();
}

#endif

template <typename T>
cudaError_t launch_typed(const MlaAttentionLaunch& p, cudaStream_t stream) {
  const cudaError_t status = allow_smem<mla_attention_wgmma_kernel<T>>(kSmemBytes);
  if (status != cudaSuccess) return status;
  const dim3 grid(static_cast<unsigned>(p.num_seqs), static_cast<unsigned>(ceil_div(p.max_query_len * p.heads, kTileEntries)),
                  static_cast<unsigned>(p.splits));
  mla_attention_wgmma_kernel<T><<<grid, kThreads, kSmemBytes, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace

bool wgmma_attention_shape(const MlaAttentionLaunch& p) {
  return p.kv_lora == kKv && p.dim == kDim && p.dtype != DType::kFloat32;
}

cudaError_t launch_mla_attention_wgmma(const MlaAttentionLaunch& p, cudaStream_t stream) {
  if (p.dtype == DType::kBFloat16) return launch_typed<__nv_bfloat16>(p, stream);
  if (p.dtype == DType::kFloat16) return launch_typed<__half>(p, stream);
  return cudaErrorInvalidValue;
}

}  // namespace mtpserve::kernels::cuda
