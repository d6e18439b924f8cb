#include "kernels/cuda/mla_attention_wgmma.cuh"

#include "kernels/cuda/device_info.cuh"
#include "kernels/cuda/mla_attention_tile.cuh"
#include "kernels/cuda/mla_cluster_combine.cuh"
#include "kernels/cuda/tensor_map.cuh"
#include "kernels/cuda/wgmma.cuh"

#include <array>
#include <mutex>

namespace mtpserve::kernels::cuda {

namespace {

using namespace mla_tile;
using mla_cluster_combine::combine_in_cluster;
using mla_cluster_combine::Received;
using mla_cluster_combine::send_empty;
using mla_cluster_combine::send_rows;
using wgmma::fence_operands;
using wgmma::smem_desc;

// ---------------------------------------------------------------------------------------------
// Shapes. A block's 64 entries are wgmma's M; the 576 dims lie in nine 64-wide slabs of 128-byte rows,
// 16-byte chunks swizzled by the row (the 128-byte swizzle wgmma reads without bank conflicts), so
// each slab is a run of 8-row x 128-byte atoms at 1024-byte alignment.

constexpr int kDim = 576, kKv = 512, kSlabs = kDim / 64;
constexpr int kTokens = 64;              // KV tile: S's N, so that Q is read once per 64 positions
constexpr int kBuffers = 2;              // KV tiles in shared memory: the pair in use, reloaded part by part
constexpr int kThreads = 256;            // two warpgroups
constexpr int kGroupThreads = 128;
constexpr int kQSlabBytes = kTileEntries * 128;
constexpr int kKvSlabBytes = kTokens * 128;
constexpr int kQBytes = kSlabs * kQSlabBytes;
constexpr int kTileBytes = kSlabs * kKvSlabBytes;
constexpr int kPBytes = kGroupThreads * 64;          // a warpgroup's P (64 x 64) as its threads' A fragments
constexpr int kMaxBytes = kTileEntries * 4;          // the row maxima after a tile, handed to the other warpgroup
// A tile lands in two parts, each with its "full" mbarrier: slabs 0-3 (the value columns warpgroup 0's P V
// reads) and slabs 4-8 (warpgroup 1's value columns and the rope dims). Each part is reloaded by the warpgroup
// whose P V reads it last, as soon as that product is done.
constexpr int kParts = 2;
constexpr int kBarrierBytes = kBuffers * kParts * 8;
constexpr size_t kSmemBytes = kQBytes + kBuffers * kTileBytes + 2 * kMaxBytes + kBarrierBytes + 1024;  // + alignment
static_assert(kSmemBytes <= 227 * 1024, "shared memory");
static_assert(mla_cluster_combine::received_fits(kKv, kQBytes + kBuffers * kTileBytes),
              "the cluster's partials fit where the Q tile and the KV buffers were");

// The device code exists only in the sm_90a pass (wgmma); the plain sm_90 pass gets a kernel that traps,
// which sm90a_device() keeps from being launched.
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)

constexpr int kChunksPerRow = kDim / 8;  // 16-byte chunks
constexpr int kSlabSteps = 4;            // k16 steps per 64-dim slab
// The k16 steps of S whose Q operand each thread holds in registers (dims 0-127). Their two slabs of the Q tile
// are then free, and hold the warpgroups' P tiles.
constexpr int kQRegisterSteps = 8;
static_assert(kQRegisterSteps / kSlabSteps * kQSlabBytes >= 2 * kPBytes, "the P tiles fit in Q's freed slabs");
constexpr int kColsPerGroup = kKv / 2;   // value columns of each warpgroup's O

// Byte offset of 16-byte chunk c of row `row` in a region whose slabs hold `slab_bytes` each.
__device__ __forceinline__ uint32_t swizzled(int row, int c, int slab_bytes) {
  return (c >> 3) * slab_bytes + row * 128 + (((c & 7) ^ (row & 7)) << 4);
}

// S (64 x 64) (+)= Q K^T over slabs [kFirst, kEnd) of the 576 dims, from Q's first kQRegisterSteps k16 steps in
// registers (`qf`), the rest from the descriptor of Q's first slab, and the KV tile's descriptor: every k16
// step's descriptor is a compile-time offset from those (the address field is the low 14 bits of byte address /
// 16 and shared memory stays below 256 KB, so adding never carries out of it), which keeps the per-step work to
// uniform-register adds.
template <typename T, int kFirst, int kEnd>
__device__ __forceinline__ void issue_scores(float (&s)[kTokens / 8][4], const uint32_t (&qf)[kQRegisterSteps][4],
                                             uint64_t q_desc, uint64_t kv_desc) {
#pragma unroll
  for (int ks = kFirst * kSlabSteps; ks < kEnd * kSlabSteps; ++ks) {
    const uint32_t within = (ks % kSlabSteps) * 32;
    const uint64_t k_desc = kv_desc + (((ks / kSlabSteps) * kKvSlabBytes + within) >> 4);
    if (ks < kQRegisterSteps) {
      wgmma::mma_rs_n64_kb<T>(s, qf[ks], k_desc, ks > 0);
    } else {
      wgmma::mma_ss_n64<T>(s, q_desc + (((ks / kSlabSteps) * kQSlabBytes + within) >> 4), k_desc, ks > 0);
    }
  }
}

// This thread's A fragments of Q's first kQRegisterSteps k16 steps (wgmma's register layout, as p_fragment's: rows
// row0 and row0 + 8, dims 16 ks + 2 tq + {0, 1} and those + 8), from the swizzled Q tile.
__device__ __forceinline__ void load_q_fragments(const unsigned char* sq, int row0, int tq,
                                                 uint32_t (&qf)[kQRegisterSteps][4]) {
  const auto pair_at = [&](int row, int chunk) {
    return *reinterpret_cast<const uint32_t*>(sq + swizzled(row, chunk, kQSlabBytes) + 4 * tq);
  };
#pragma unroll
  for (int ks = 0; ks < kQRegisterSteps; ++ks) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      qf[ks][2 * h] = pair_at(row0, 2 * ks + h);
      qf[ks][2 * h + 1] = pair_at(row0 + 8, 2 * ks + h);
    }
  }
}

// O (64 x 256 of this warpgroup's value columns) += P V over a tile: P as A fragments (one per k16 step of the
// tile's tokens), V from the descriptor of the tile's first slab of this warpgroup's columns.
template <typename T>
__device__ __forceinline__ void issue_values(float (&o)[32][4], const uint32_t (&pa)[kTokens / 16][4], uint64_t v_desc) {
#pragma unroll
  for (int kk = 0; kk < kTokens / 16; ++kk) {
#pragma unroll
    for (int j = 0; j < 4; ++j) wgmma::mma_rs_n64<T>(o + 8 * j, pa[kk], v_desc + ((j * kKvSlabBytes + kk * 16 * 128) >> 4));
  }
}

// Where a warpgroup copies a tile part with cp.async, its thread i copies rows i / 8 + 16 pass, 16-byte chunk
// i % 8 of each of the part's slabs, so eight threads read a row's contiguous bytes and the swizzled destination
// is fixed per thread.
constexpr int kRowThreads = 8;
constexpr int kRowsPerPass = kGroupThreads / kRowThreads;

// The cache row of position `pos`, or -1 at or past `end`. `block_shift` >= 0 says block_size is
// 2^block_shift (the usual sizes): a shift instead of an integer division, which costs some 40 instructions a
// tile.
__device__ __forceinline__ int64_t cache_row(const int32_t* table, int block_size, int block_shift, int pos, int end) {
  if (pos >= end) return -1;
  const int block = block_shift >= 0 ? pos >> block_shift : pos / block_size;
  return static_cast<int64_t>(table[block]) * block_size + (pos - block * block_size);
}

// Copies slabs [first_slab, first_slab + slabs) of cache row `cache_index` (zeros for -1) into this thread's
// chunks of a buffer row (`buffer_row` at the first of those slabs).
template <typename T>
__device__ __forceinline__ void load_kv_row(unsigned char* buffer_row, const T* cache, int64_t cache_index,
                                            int first_slab, int slabs) {
  const bool valid = cache_index >= 0;
  const T* src = cache + (threadIdx.x % kRowThreads) * 8 + first_slab * 64 + (valid ? cache_index * kDim : 0);
  for (int m = 0; m < slabs; ++m) cp_async16(buffer_row + m * kKvSlabBytes, src + m * 64, valid);
}

// ---------------------------------------------------------------------------------------------
// Tile copies. With block sizes that are multiples of 64, one thread copies a tile part with the tensor-copy
// engine: 64 x 64 boxes of the cache seen as a [rows, 576] tensor, 128-byte swizzled exactly as the buffer's
// slabs are (a tile then never crosses a cache block, since tiles start at multiples of 64, so its rows are
// consecutive cache rows). Otherwise the warpgroup's 128 threads copy it with cp.async, each arriving on the
// part's mbarrier when its copies land.

// Zeroes rows [first, kTokens) of a tile (positions at or past the split's end, which a bulk copy brings in
// whatever the cache holds there): a masked score's zero probability must not meet a NaN in V.
__device__ __forceinline__ void zero_rows(unsigned char* tile, int first, int lane_in_group) {
  for (int i = first * kRowThreads + lane_in_group; i < kTokens * kRowThreads; i += kGroupThreads) {
    const int row = i / kRowThreads, c = i % kRowThreads;
#pragma unroll
    for (int m = 0; m < kSlabs; ++m) {
      *reinterpret_cast<uint4*>(tile + m * kKvSlabBytes + row * 128 + ((c ^ (row & 7)) << 4)) = make_uint4(0, 0, 0, 0);
    }
  }
}

// Named barriers: warpgroup 0's maxima after tile a are in shared memory, its P of a is, warpgroup 1's maxima
// after b and its P of b are (4 and 5 are zero_rows's, one per warpgroup).
constexpr int kMaxAReady = 1, kPAReady = 2, kBReady = 3, kRowsZeroed = 4;

// Scales a warp's output rows when some factor of its rows is not 1 (the maxima moved).
__device__ __forceinline__ void rescale(float (&o)[32][4], const float (&f)[2]) {
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    o[i][0] *= f[0];
    o[i][1] *= f[0];
    o[i][2] *= f[1];
    o[i][3] *= f[1];
  }
}
__device__ __forceinline__ bool moved(const float (&f)[2]) { return __any_sync(0xffffffffu, f[0] != 1.0f || f[1] != 1.0f); }

// ---------------------------------------------------------------------------------------------
// Two warpgroups take the 64-token KV tiles in pairs: warpgroup 0 tile a = 2i, warpgroup 1 tile b = 2i + 1 (each
// in its own buffer), and each holds the output of half the value columns ([256h, 256h + 256) for warpgroup h).
// Their softmaxes run one after the other, each beside the other warpgroup's products:
//   wg 0   from the running maxima and a's tops, the maxima after a (handed over), then P_a (handed over);
//          O *= exp(m - m_a) where a maximum moved, O += P_a V_a;
//   wg 1   O *= exp(m - m_a), O += P_a V_a, then S of b; from the maxima after a and b's tops, the maxima after b
//          and P_b (both handed over); O *= exp(m_a - m_b), O += P_b V_b;
//   wg 0   O *= exp(m_a - m_b), O += P_b V_b, then S of its next tile.
// So both warpgroups apply the same factors to the same bf16 P of every tile, in tile order, and a row's result
// depends on its own scores alone. Warp w of a warpgroup owns entries [16w, 16w + 16).
// A part of a buffer is reloaded by the warpgroup whose P V reads it, as soon as that product is done; S of a tile
// waits for each part as it issues that part's k16 steps. Tile b's buffer is free only once both P_b V_b are done,
// at the end of a pair. With kScoresLate warpgroup 1 issues S of b + 2 behind its P V of a + 2, so that b + 2's
// copies land while that product runs; otherwise straight after the copies, which it then waits out, with S of b
// done before the pair and its softmax beside P_a V_a. Late is 3-7% faster at B = 16 on an H200, where every SM
// streams and a copy waits long; early is 4% faster at B = 1, where 32 blocks stream and the serial S costs more.

// kBulk: tiles come by bulk copies from `cache_map` (block sizes that are multiples of 64), else by cp.async.
// `in_cluster`: the launch runs in clusters of its splits' blocks, which combine the splits themselves.
template <typename T, bool kBulk, bool kScoresLate>
__global__ void __launch_bounds__(kThreads, 1)
    mla_attention_wgmma_kernel(const MlaAttentionLaunch p, const __grid_constant__ CUtensorMap cache_map,
                               bool in_cluster) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  TileWork w;
  if (!tile_work(p, w)) return;
  unsigned char* sq = smem_raw + (1024 - smem_addr(smem_raw) % 1024) % 1024;
  const uint32_t q_addr = smem_addr(sq);
  if (w.begin >= w.end && p.splits > 1) {  // nothing visible in this split: it contributes nothing
    if (!in_cluster) {
      mark_empty_split(p, w);
      return;
    }
    combine_in_cluster<T, kKv, kThreads / 32>(p, w, sq, [&](const Received& to) { send_empty(w, p.splits, to); });
    return;
  }
  // The warpgroup, broadcast from lane 0 so the compiler knows it is warp-uniform and keeps what derives from
  // it (the wgmma descriptors) in uniform registers.
  const int group = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x >> 7), 0);
  const int warp = (threadIdx.x >> 5) & 3;
  const int lane_in_group = threadIdx.x & 127;
  const int tq = threadIdx.x & 3, gid = (threadIdx.x & 31) >> 2;

  unsigned char* skv = sq + kQBytes;
  float* s_max = reinterpret_cast<float*>(skv + kBuffers * kTileBytes);  // [a, b][64 rows]: the maxima after a tile
  const uint32_t kv_addr = smem_addr(skv);
  const uint32_t full = smem_addr(s_max + 2 * kTileEntries);  // [buffer][part] mbarriers, 8 bytes each

  const T* cache = static_cast<const T*>(p.cache);
  const int32_t* table = p.block_tables + static_cast<int64_t>(blockIdx.x) * p.table_width;
  const int block_size = static_cast<int>(p.block_size);
  const int block_shift = (block_size & (block_size - 1)) == 0 ? __ffs(block_size) - 1 : -1;
  const int num_tiles = static_cast<int>(ceil_div(w.end - w.begin, kTokens));

  // The cache row of tile t's first position (bulk copies).
  const auto first_row = [&](int t) {
    return static_cast<int>(cache_row(table, block_size, block_shift, w.begin + t * kTokens, w.end));
  };
  const auto part_barrier = [&](int t, int part) { return full + 8 * ((t % kBuffers) * kParts + part); };
  // Copies part `part` of tile t (slabs 0-3, or 4-8) into its buffer, whose readers of that part are done: with
  // bulk copies from cache row `row` by the warpgroup's first thread, else by all its threads.
  const auto load_part = [&](int t, int part, int row) {
    const int first_slab = 4 * part, slabs = 4 + part;
    const uint32_t bar = part_barrier(t, part);
    const int offset = (t % kBuffers) * kTileBytes + first_slab * kKvSlabBytes;
    if constexpr (kBulk) {
      if (lane_in_group != 0) return;
      mbarrier_expect(bar, slabs * kKvSlabBytes);
      const uint64_t policy = evict_first_policy();
      for (int m = 0; m < slabs; ++m) {
        bulk_box(kv_addr + offset + m * kKvSlabBytes, &cache_map, (first_slab + m) * 64, row, bar, policy);
      }
    } else {
      const int first = w.begin + t * kTokens;
#pragma unroll
      for (int pass = 0; pass < kTokens / kRowsPerPass; ++pass) {
        const int r = lane_in_group / kRowThreads + pass * kRowsPerPass;
        unsigned char* dst = skv + offset + r * 128 + (((lane_in_group % kRowThreads) ^ (r & 7)) << 4);
        load_kv_row<T>(dst, cache, cache_row(table, block_size, block_shift, first + r, w.end), first_slab, slabs);
      }
      cp_async_arrive(bar);
    }
  };
  const auto load_tile = [&](int t) {
    const int row = kBulk ? first_row(t) : 0;
    load_part(t, 0, row);
    load_part(t, 1, row);
  };
  // Waits for a part of tile t to land (its copies are seen by wgmma after the proxy fence).
  const auto wait_part = [&](int t, int part) {
    mbarrier_wait(part_barrier(t, part), (t / kBuffers) & 1);
    fence_async_shared();
  };
  const auto tile_desc = [&](int t, uint32_t offset, uint32_t leading) {
    return smem_desc(kv_addr + (t % kBuffers) * kTileBytes + offset, leading, 1024);
  };

  // The Q tile, padding entries zeroed; then the barriers, and (bulk copies) thread 0 starts the first two tiles'
  // copies. Thread 0's share of Q goes first: behind the tiles' copies, into a memory system that every SM is
  // loading, it landed last, and every warp waited for it before the first S (6% of the stall samples at B = 16 on
  // an H200; issued first, a call there is 2% faster).
  const T* q = static_cast<const T*>(p.q) + w.out_row * kDim;
  for (int i = threadIdx.x; i < kTileEntries * kChunksPerRow; i += kThreads) {
    const int r = i / kChunksPerRow, c = i % kChunksPerRow;
    const bool valid = r < w.count;
    cp_async16(sq + swizzled(r, c, kQSlabBytes), q + (valid ? r : 0) * kDim + c * 8, valid);
  }
  cp_async_commit();
  if (threadIdx.x == 0) {
    for (int i = 0; i < kBuffers * kParts; ++i) mbarrier_init(full + 8 * i, kBulk ? 1 : kGroupThreads);
    fence_barrier_init();
    if constexpr (kBulk) {
      for (int t = 0; t < min(num_tiles, 2); ++t) load_tile(t);
    }
  }
  __syncthreads();
  if (!kBulk && group < num_tiles) load_tile(group);

  int limit[2];
  row_limits(p, w, 16 * warp, limit);
  const float scale_log2 = p.scale * kLog2e;
  const uint32_t v_offset = group * 4 * kKvSlabBytes;  // this warpgroup's value columns in a tile
  const uint64_t q_desc = smem_desc(q_addr, 16, 1024);
  const int row0 = 16 * warp + gid;  // this thread's rows: row0 and row0 + 8
  // The P tiles, in Q's slabs whose k16 steps are in registers: a warpgroup's P of its own tile as A fragments,
  // stored by each thread for the thread of the other warpgroup that holds the same positions.
  uint4* p_out = reinterpret_cast<uint4*>(sq + group * kPBytes) + lane_in_group;
  const uint4* p_in = reinterpret_cast<const uint4*>(sq + (group ^ 1) * kPBytes) + lane_in_group;
  const auto hand_over = [&](const float (&scores)[kTokens / 8][4], uint32_t (&mine)[kTokens / 16][4]) {
#pragma unroll
    for (int kk = 0; kk < kTokens / 16; ++kk) {
      p_fragment<T>(scores, kk, mine[kk]);
      p_out[kk * kGroupThreads] = make_uint4(mine[kk][0], mine[kk][1], mine[kk][2], mine[kk][3]);
    }
  };
  const auto take_over = [&](uint32_t (&theirs)[kTokens / 16][4]) {
#pragma unroll
    for (int kk = 0; kk < kTokens / 16; ++kk) {
      const uint4 x = p_in[kk * kGroupThreads];
      theirs[kk][0] = x.x, theirs[kk][1] = x.y, theirs[kk][2] = x.z, theirs[kk][3] = x.w;
    }
  };
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  float o[4 * 8][4];  // four 64-column accumulators of m64n64, 8 n8 tiles each
#pragma unroll
  for (int i = 0; i < 32; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;

  cp_async_wait<0>();
  fence_async_shared();  // Q's cp.async writes, read by wgmma
  __syncthreads();
  uint32_t qf[kQRegisterSteps][4];
  load_q_fragments(sq, row0, tq, qf);
  __syncthreads();  // Q's first slabs are in registers: they take the P tiles from here on

  float s[kTokens / 8][4];
  // S of tile t, issued part by part as each lands.
  const auto issue_tile_scores = [&](int t) {
    wgmma::fence();
    wait_part(t, 0);
    issue_scores<T, 0, 4>(s, qf, q_desc, tile_desc(t, 0, 16));
    wait_part(t, 1);
    issue_scores<T, 4, kSlabs>(s, qf, q_desc, tile_desc(t, 0, 16));
  };
  // Once S of tile t is done, its owner zeroes its rows past the split's end, before any P V reads them.
  const auto clear_tail = [&](int t) {
    const int valid = w.end - (w.begin + t * kTokens);
    if (kBulk && valid < kTokens) {
      zero_rows(skv + (t % kBuffers) * kTileBytes, valid, lane_in_group);
      fence_async_shared();
      named_sync(kRowsZeroed + group, kGroupThreads);
    }
  };
  // Whether this warpgroup scores its tile of the next pair at the end of a pair (warpgroup 1 does so in the pair).
  const bool scores_ahead = group == 0 || !kScoresLate;
  if (scores_ahead && group < num_tiles) issue_tile_scores(group);
  wgmma::commit();
  wgmma::wait();
  fence_operands(s);
  if (scores_ahead && group < num_tiles) clear_tail(group);

  int a = 0;
  for (; a + 1 < num_tiles; a += 2) {
    const int b = a + 1;
    const bool next_a = a + 2 < num_tiles, next_b = b + 2 < num_tiles;
    const int row_a = kBulk && next_a ? first_row(a + 2) : 0, row_b = kBulk && next_b ? first_row(b + 2) : 0;
    float top[2], m_a[2], before[2], row_sum[2], base[2];
    uint32_t mine[kTokens / 16][4], theirs[kTokens / 16][4];
    if (scores_ahead) tile_tops(s, w.begin + (a + group) * kTokens, w.end, limit, scale_log2, tq, top);
    if (group == 0) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        m_a[r] = next_max(m[r], top[r]);
        before[r] = move_factor(m[r], m_a[r]);
        base[r] = exp_base(m_a[r]);
      }
      if (tq == 0) s_max[row0] = m_a[0], s_max[row0 + 8] = m_a[1];
      named_arrive(kMaxAReady, kThreads);
      exponentiate(s, scale_log2, base, row_sum);
      hand_over(s, mine);
      named_arrive(kPAReady, kThreads);
      if (moved(before)) rescale(o, before);
      fence_operands(o);
      wgmma::fence();
      issue_values<T>(o, mine, tile_desc(a, v_offset, 1024));
      wgmma::commit();
      wgmma::wait();
      fence_operands(o);
      if (next_a) load_part(a + 2, 0, row_a);
      named_sync(kBReady, kThreads);
      float after[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float m_b = s_max[kTileEntries + row0 + 8 * r];
        after[r] = move_factor(m_a[r], m_b);
        l[r] = (l[r] * before[r] + row_sum[r]) * after[r];
        m[r] = m_b;
      }
      take_over(theirs);
      if (moved(after)) rescale(o, after);
      fence_operands(o);
      wgmma::fence();
      issue_values<T>(o, theirs, tile_desc(b, v_offset, 1024));
      wgmma::commit();
      if (next_a) {
        wgmma::fence();
        wait_part(a + 2, 0);
        issue_scores<T, 0, 4>(s, qf, q_desc, tile_desc(a + 2, 0, 16));
      }
      wgmma::commit();
      wgmma::wait<1>();  // P_b V_b
      fence_operands(o);
      if (next_b) load_part(b + 2, 0, row_b);
      if (next_a) {
        wait_part(a + 2, 1);
        issue_scores<T, 4, kSlabs>(s, qf, q_desc, tile_desc(a + 2, 0, 16));
      }
    } else {
      named_sync(kMaxAReady, kThreads);
      float after[2], m_b[2];
      // From the maxima after a and b's tops, the maxima after b.
      const auto after_b = [&] {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          m_b[r] = next_max(m_a[r], top[r]);
          after[r] = move_factor(m_a[r], m_b[r]);
          base[r] = exp_base(m_b[r]);
        }
      };
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        m_a[r] = s_max[row0 + 8 * r];
        before[r] = move_factor(m[r], m_a[r]);
      }
      if constexpr (!kScoresLate) after_b();
      named_sync(kPAReady, kThreads);
      take_over(theirs);  // before kBReady, after which warpgroup 0 writes its next P
      if (moved(before)) rescale(o, before);
      fence_operands(o);
      wgmma::fence();
      issue_values<T>(o, theirs, tile_desc(a, v_offset, 1024));
      wgmma::commit();
      if constexpr (kScoresLate) {
        issue_tile_scores(b);
        wgmma::commit();
        wgmma::wait();
        fence_operands(s);
        fence_operands(o);
        clear_tail(b);
        if (next_a) load_part(a + 2, 1, row_a);
        tile_tops(s, w.begin + b * kTokens, w.end, limit, scale_log2, tq, top);
        after_b();
      }
      exponentiate(s, scale_log2, base, row_sum);
      hand_over(s, mine);
      if (tq == 0) s_max[kTileEntries + row0] = m_b[0], s_max[kTileEntries + row0 + 8] = m_b[1];
      named_arrive(kBReady, kThreads);
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float scaled = l[r] * before[r];
        l[r] = scaled * after[r] + row_sum[r];
        m[r] = m_b[r];
      }
      if (moved(after)) {
        wgmma::wait();
        fence_operands(o);
        rescale(o, after);
        fence_operands(o);
      }
      wgmma::fence();
      issue_values<T>(o, mine, tile_desc(b, v_offset, 1024));
      wgmma::commit();
      if constexpr (!kScoresLate) {
        wgmma::wait<1>();  // P_a V_a
        if (next_a) load_part(a + 2, 1, row_a);
      }
      wgmma::wait();
      fence_operands(o);
      if (next_b) {
        load_part(b + 2, 1, row_b);
        if constexpr (!kScoresLate) issue_tile_scores(b + 2);
      }
    }
    wgmma::commit();
    wgmma::wait();
    fence_operands(s);
    fence_operands(o);
    if (scores_ahead && a + 2 + group < num_tiles) clear_tail(a + 2 + group);
  }
  if (a < num_tiles) {  // the split's last tile, alone: S is warpgroup 0's
    float m_a[2], before[2];
    uint32_t pa[kTokens / 16][4];
    if (group == 0) {
      float top[2], base[2], row_sum[2];
      tile_tops(s, w.begin + a * kTokens, w.end, limit, scale_log2, tq, top);
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        m_a[r] = next_max(m[r], top[r]);
        base[r] = exp_base(m_a[r]);
      }
      exponentiate(s, scale_log2, base, row_sum);
      hand_over(s, pa);
      if (tq == 0) s_max[row0] = m_a[0], s_max[row0 + 8] = m_a[1];
      named_arrive(kPAReady, kThreads);
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        before[r] = move_factor(m[r], m_a[r]);
        l[r] = l[r] * before[r] + row_sum[r];
        m[r] = m_a[r];
      }
    } else {
      named_sync(kPAReady, kThreads);
      take_over(pa);
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        m_a[r] = s_max[row0 + 8 * r];
        before[r] = move_factor(m[r], m_a[r]);
        l[r] *= before[r];
        m[r] = m_a[r];
      }
    }
    if (moved(before)) rescale(o, before);
    fence_operands(o);
    wgmma::fence();
    issue_values<T>(o, pa, tile_desc(a, v_offset, 1024));
    wgmma::commit();
    wgmma::wait();
    fence_operands(o);
  }
  // Each warpgroup summed its own tiles' probabilities: the row sums are the two together (a + b and b + a,
  // the same float in both warpgroups).
  __syncthreads();
  reinterpret_cast<float2*>(sq)[threadIdx.x] = make_float2(l[0], l[1]);
  __syncthreads();
  const float2 other = reinterpret_cast<const float2*>(sq)[threadIdx.x ^ kGroupThreads];
  l[0] += other.x;
  l[1] += other.y;
  if (!in_cluster) {
    store_rows<T, kKv, 32>(p, w, 16 * warp, group * kColsPerGroup + 2 * tq, o, m, l, group == 0 && tq == 0);
    return;
  }
  combine_in_cluster<T, kKv, kThreads / 32>(p, w, sq, [&](const Received& to) {
    send_rows(w, p.splits, to, 16 * warp + gid, group * kColsPerGroup + 2 * tq, o, m, l, group == 0 && tq == 0);
  });
}

#else

template <typename T, bool kBulk, bool kScoresLate>
__global__ void __launch_bounds__(kThreads, 1)
    mla_attention_wgmma_kernel(const MlaAttentionLaunch, const __grid_constant__ CUtensorMap, bool) {
  __trap();
}

#endif

// The cache as a [cache_rows, 576] tensor read in 64 x 64 boxes; false when the bulk copies cannot serve the
// launch (a block size that is not a multiple of 64, or no encoder).
bool cache_tensor_map(const MlaAttentionLaunch& p, CUtensorMap& map) {
  return p.block_size % kTokens == 0 && encode_swizzled_map(map, p.cache, p.dtype, p.cache_rows, kDim, kTokens);
}

// More splits than a cluster holds leave partials for the combine kernel.
constexpr int kMaxClusterSplits = mla_cluster_combine::kMaxSplits;

// How many clusters of `splits` blocks of `kernel` (launched as `config`) the current device holds at once, asked
// once per device and split count (0 where it holds none, or the device cannot say).
template <auto kernel>
int resident_clusters(const cudaLaunchConfig_t& config, int splits) {
  static std::array<std::array<int, kMaxClusterSplits + 1>, 64> known = [] {
    std::array<std::array<int, kMaxClusterSplits + 1>, 64> unknown;
    for (auto& row : unknown) row.fill(-1);
    return unknown;
  }();
  static std::mutex mutex;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device >= static_cast<int>(known.size())) return 0;
  std::lock_guard<std::mutex> lock(mutex);
  int& count = known[device][splits];
  if (count < 0 && cudaOccupancyMaxActiveClusters(&count, kernel, &config) != cudaSuccess) {
    cudaGetLastError();
    count = 0;
  }
  return count;
}

// With 2 to 8 splits the launch runs in clusters of a tile's splits, which combine them (`combined`), where the
// device holds every cluster at once: one wave, as the launch without clusters has at those split counts
// (mla_attention_splits). Otherwise, or where the cluster launch fails (fewer SMs than the device has, under MPS),
// the blocks leave partials for the combine kernel.
template <typename T, bool kBulk, bool kScoresLate>
cudaError_t launch_kernel(const MlaAttentionLaunch& p, const dim3 grid, const CUtensorMap& map, cudaStream_t stream,
                          bool& combined) {
  constexpr auto kernel = mla_attention_wgmma_kernel<T, kBulk, kScoresLate>;
  cudaError_t status = allow_smem<kernel>(kSmemBytes);
  if (status != cudaSuccess) return status;
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = 1;
  cluster.val.clusterDim.y = 1;
  cluster.val.clusterDim.z = grid.z;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = kSmemBytes;
  config.stream = stream;
  config.attrs = &cluster;
  config.numAttrs = 1;
  const int64_t tiles = static_cast<int64_t>(grid.x) * grid.y;
  const bool in_cluster = p.splits > 1 && p.splits <= kMaxClusterSplits && tiles <= resident_clusters<kernel>(config, p.splits);
  if (in_cluster) {
    status = cudaLaunchKernelEx(&config, kernel, p, map, true);
    if (status == cudaSuccess) {
      combined = true;
      return status;
    }
    cudaGetLastError();
  }
  config.attrs = nullptr;
  config.numAttrs = 0;
  return cudaLaunchKernelEx(&config, kernel, p, map, false);
}

// Warpgroup 1 scores its tiles late (kScoresLate) where the launch's blocks fill at least half the SMs, so that
// their copies wait long in a loaded memory system.
template <typename T, bool kBulk>
cudaError_t launch_ordered(const MlaAttentionLaunch& p, const CUtensorMap& map, cudaStream_t stream, bool& combined) {
  const dim3 grid(static_cast<unsigned>(p.num_seqs),
                  static_cast<unsigned>(ceil_div(p.max_query_len * p.heads, kTileEntries)),
                  static_cast<unsigned>(p.splits));
  if (2 * static_cast<int64_t>(grid.x) * grid.y * grid.z >= current_multiprocessor_count()) {
    return launch_kernel<T, kBulk, true>(p, grid, map, stream, combined);
  }
  return launch_kernel<T, kBulk, false>(p, grid, map, stream, combined);
}

template <typename T>
cudaError_t launch_typed(const MlaAttentionLaunch& p, cudaStream_t stream, bool& combined) {
  CUtensorMap map{};
  if (cache_tensor_map(p, map)) return launch_ordered<T, true>(p, map, stream, combined);
  return launch_ordered<T, false>(p, map, stream, combined);
}

}  // namespace

bool wgmma_attention_shape(const MlaAttentionLaunch& p) {
  return p.kv_lora == kKv && p.dim == kDim && p.dtype != DType::kFloat32;
}

cudaError_t launch_mla_attention_wgmma(const MlaAttentionLaunch& p, cudaStream_t stream, bool& combined) {
  combined = false;
  if (p.dtype == DType::kBFloat16) return launch_typed<__nv_bfloat16>(p, stream, combined);
  if (p.dtype == DType::kFloat16) return launch_typed<__half>(p, stream, combined);
  return cudaErrorInvalidValue;
}

}  // namespace mtpserve::kernels::cuda
