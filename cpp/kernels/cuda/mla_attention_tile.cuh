#pragma once
// What the tensor-core MLA kernels (mla_attention.cu's mma.sync kernel and the Hopper wgmma kernel)
// share: the (sequence, entry tile, KV split) work of a block, the split constants, the online softmax of a
// tile and fragment packing.
#include <cmath>

#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/mla_attention.cuh"

namespace mtpserve::kernels::cuda::mla_tile {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kRescaleSlack = 8.0f;  // log2 units: probabilities up to 256 before the accumulators rescale

// ---------------------------------------------------------------------------------------------
// Work split shared by the tensor-core kernels and their host side.

constexpr int kTileEntries = 64;     // (row, head) entries per block
constexpr int kSplitAlign = 64;      // split boundaries are multiples of this many tokens
constexpr int kMinSplitTokens = 256;  // a split shorter than this costs more in setup and combine than it saves
constexpr int kMaxSplits = 32;       // B = 1 at context 8192 takes all of them (256 tokens each)
constexpr int64_t kSplitOverheadTokens = 64;  // a split's fp32 partial output and its combine, in KV rows

__host__ __device__ constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Two floats as one 32-bit register of T pairs, the first in the low half (the fragment order).
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}
template <>
__device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
  __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// ---------------------------------------------------------------------------------------------
// One KV tile of the online softmax (8 N tokens), in the log2 domain, on a warp's m16n8 accumulator
// fragments of S = Q K^T: s[i][c] is row gid + 8 * (c >> 1), token tile_start + 8i + 2tq + (c & 1).
// The steps (tile_tops, next_max, exponentiate) are separate so that the Hopper kernel can run two tiles'
// exponentials at once, one per warpgroup, once both tiles' tops are known.

// 2^x by the MUFU unit alone (exp2f adds range fix-ups around it); flushes results below 2^-126 to zero.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Masks positions at or past `end` and past each row's `limit` in s, and returns in `top` each of the thread's
// two rows' maximum score in log2 units (the quad's, so all four threads of a row hold it).
template <int N>
__device__ __forceinline__ void tile_tops(float (&s)[N][4], int tile_start, int end, const int (&limit)[2],
                                          float scale_log2, int tq, float (&top)[2]) {
  // Most tiles are visible to all of a thread's positions: they skip the per-position mask.
  const int tile_last = tile_start + 8 * N - 1;
  if (tile_last >= end || tile_last > min(limit[0], limit[1])) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int pos = tile_start + 8 * i + 2 * tq + (c & 1);
        if (pos >= end || pos > limit[c >> 1]) s[i][c] = -INFINITY;
      }
    }
  }
  // The maxima of the unscaled scores: scale_log2 > 0 keeps their order, so scaling the maximum afterwards
  // gives the same float as the maximum of the scaled scores.
  float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int i = 0; i < N; ++i) {
#pragma unroll
    for (int c = 0; c < 4; ++c) tile_max[c >> 1] = fmaxf(tile_max[c >> 1], s[i][c]);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
    top[r] = tile_max[r] * scale_log2;
  }
}

// The running maximum after a tile whose top is `top`. It moves only when the tile's exceeds it by more than
// kRescaleSlack: every other tile skips rescaling the output accumulators (the block's slowest warp sets the
// tile's time), and its probabilities stay below 2^kRescaleSlack, far inside fp32's and the P operand's range.
// A row decides from its own scores alone, so its result does not depend on the rows beside it.
__device__ __forceinline__ float next_max(float m, float top) { return top > m + kRescaleSlack ? top : m; }

// What a tile's exponents subtract under running maximum m: 0 for a row with nothing visible yet, which keeps
// p = 0 and its factor 2^(-inf) = 0.
__device__ __forceinline__ float exp_base(float m) { return m == -INFINITY ? 0.0f : m; }

// The factor a row's output and sum take when its running maximum moves from m to m_new.
__device__ __forceinline__ float move_factor(float m, float m_new) { return fast_exp2(m - exp_base(m_new)); }

// The probabilities p = 2^(s scale_log2 - base) in s, and the thread's partial sums of its two rows.
template <int N>
__device__ __forceinline__ void exponentiate(float (&s)[N][4], float scale_log2, const float (&base)[2],
                                             float (&row_sum)[2]) {
  row_sum[0] = row_sum[1] = 0.0f;
#pragma unroll
  for (int i = 0; i < N; ++i) {
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      s[i][c] = fast_exp2(fmaf(s[i][c], scale_log2, -base[c >> 1]));
      row_sum[c >> 1] += s[i][c];
    }
  }
}

// The whole tile: folds it into the row maxima m and the thread's partial sums l (quad-summed by the caller at
// the end), leaves the probabilities in s and the factor the row's output accumulators must be scaled by in
// alpha.
__device__ __forceinline__ void online_softmax(float (&s)[4][4], int tile_start, int end,
                                                      const int (&limit)[2], float scale_log2, int tq,
                                                      float (&m)[2], float (&l)[2], float (&alpha)[2]) {
  float top[2], base[2], row_sum[2];
  tile_tops(s, tile_start, end, limit, scale_log2, tq, top);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float m_new = next_max(m[r], top[r]);
    base[r] = exp_base(m_new);
    alpha[r] = move_factor(m[r], m_new);
    m[r] = m_new;
  }
  exponentiate(s, scale_log2, base, row_sum);
#pragma unroll
  for (int r = 0; r < 2; ++r) l[r] = l[r] * alpha[r] + row_sum[r];
}

// P's accumulators are already the A fragments of O += P V: k-step kk is n8 tiles 2kk and 2kk + 1.
template <typename T, int N>
__device__ __forceinline__ void p_fragment(const float (&s)[N][4], int kk, uint32_t (&a)[4]) {
  a[0] = pack2<T>(s[2 * kk][0], s[2 * kk][1]);
  a[1] = pack2<T>(s[2 * kk][2], s[2 * kk][3]);
  a[2] = pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
  a[3] = pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
}

// ---------------------------------------------------------------------------------------------
// Where a block's entries and KV range lie.

struct TileWork {
  int64_t out_row;  // global entry row (token * heads + head) of the tile's first entry
  int first_entry;  // entry index within the sequence
  int count;        // real entries in the tile (<= kTileEntries)
  int q_len, context;
  int begin, end;   // this split's KV positions [begin, end)
};

// False when the block has no entries. The KV range stops at the tile's last visible position.
__device__ __forceinline__ bool tile_work(const MlaAttentionLaunch& p, TileWork& w) {
  const int s = blockIdx.x, tile = blockIdx.y, split = blockIdx.z;
  const int q0 = p.query_start[s];
  w.q_len = p.query_start[s + 1] - q0;
  const int entries = w.q_len * static_cast<int>(p.heads);
  w.first_entry = tile * kTileEntries;
  if (w.first_entry >= entries) return false;
  w.count = min(kTileEntries, entries - w.first_entry);
  w.out_row = static_cast<int64_t>(q0) * p.heads + w.first_entry;
  w.context = p.context_lens[s];
  const int last_visible = w.context - w.q_len + (w.first_entry + w.count - 1) / static_cast<int>(p.heads);
  const int kv_len = max(0, min(w.context, last_visible + 1));
  const int chunk = p.split_tokens > 0
                        ? p.split_tokens
                        : static_cast<int>(ceil_div(ceil_div(kv_len, p.splits), kSplitAlign) * kSplitAlign);
  w.begin = min(kv_len, split * chunk);
  w.end = min(kv_len, w.begin + chunk);
  return true;
}

// The last KV position each of a thread's two rows (gid and gid + 8 after `first_row`) sees; padding
// rows past the tile's entries take the last entry's: finite, never stored.
__device__ __forceinline__ void row_limits(const MlaAttentionLaunch& p, const TileWork& w, int first_row,
                                          int (&limit)[2]) {
  const int gid = (threadIdx.x & 31) >> 2;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int entry = w.first_entry + first_row + gid + 8 * r;
    const int last_entry = w.first_entry + w.count - 1;
    limit[r] = w.context - w.q_len + min(entry, last_entry) / static_cast<int>(p.heads);
  }
}

// A split with nothing visible to the tile's rows: -inf as each row's lse, which leaves its partials unread.
__device__ __forceinline__ void mark_empty_split(const MlaAttentionLaunch& p, const TileWork& w) {
  const int64_t rows_total = p.tokens * p.heads;
  for (int r = threadIdx.x; r < w.count; r += blockDim.x) p.lse[blockIdx.z * rows_total + w.out_row + r] = -INFINITY;
}

// A thread's two row sums, summed over its quad (the four threads of its rows).
__device__ __forceinline__ void quad_sum(float (&l)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
}

// What a row's output is multiplied by (1 / its sum; 0 with nothing visible), and its split's log2-sum-exp.
__device__ __forceinline__ float inverse_sum(float l) { return l > 0.0f ? 1.0f / l : 0.0f; }
__device__ __forceinline__ float split_lse(float m, float l) { return l > 0.0f ? m + log2f(l) : -INFINITY; }

// The end of a block's pass for one warp: quad-sums the row sums l, then writes the warp's two rows
// (gid and gid + 8 after `first_row`) of O / l, accumulator tile i holding columns col0 + 8i and + 1 —
// to the output, or to the split's fp32 partial with the row's log2-sum-exp when the KV is split
// (that by the one thread with `writes_lse` per row).
template <typename T, int KV, int TILES>
__device__ __forceinline__ void store_rows(const MlaAttentionLaunch& p, const TileWork& w, int first_row, int col0,
                                           const float (&o)[TILES][4], const float (&m)[2], float (&l)[2],
                                           bool writes_lse) {
  const int64_t rows_total = p.tokens * p.heads;
  const int gid = (threadIdx.x & 31) >> 2;
  quad_sum(l);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = first_row + gid + 8 * r;
    if (row >= w.count) continue;
    const float inv = inverse_sum(l[r]);
    const int64_t out_row = w.out_row + row;
    if (p.splits == 1) {
      T* out = static_cast<T*>(p.out) + out_row * KV + col0;
#pragma unroll
      for (int i = 0; i < TILES; ++i) {
        *reinterpret_cast<uint32_t*>(out + 8 * i) = pack2<T>(o[i][2 * r] * inv, o[i][2 * r + 1] * inv);
      }
    } else {
      float* part = p.partial + (blockIdx.z * rows_total + out_row) * KV + col0;
#pragma unroll
      for (int i = 0; i < TILES; ++i) {
        *reinterpret_cast<float2*>(part + 8 * i) = make_float2(o[i][2 * r] * inv, o[i][2 * r + 1] * inv);
      }
      if (writes_lse) p.lse[blockIdx.z * rows_total + out_row] = split_lse(m[r], l[r]);
    }
  }
}

}  // namespace mtpserve::kernels::cuda::mla_tile
