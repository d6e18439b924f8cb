#pragma once
// The in-kernel split-KV combine of the Hopper MLA kernel (mla_attention_wgmma.cu). A launch in clusters of its
// splits' blocks (one cluster per entry tile, 2 to 8 splits) combines them through the cluster's shared memory
// instead of global partials and a second kernel. Split z owns the tile's entry rows [count z / splits,
// count (z + 1) / splits). Once every block of the cluster is done with its KV tiles, each sends every row's O / l
// (fp32) and lse into the shared memory of the row's owner, where its Q tile and KV buffers were; then each owner
// combines its rows with split_combine's arithmetic. Device code, no torch headers.
#include <cstdint>

#include "kernels/cuda/cluster.cuh"
#include "kernels/cuda/mla_attention_tile.cuh"
#include "kernels/cuda/split_combine.cuh"

namespace mtpserve::kernels::cuda::mla_cluster_combine {

using mla_tile::ceil_div;
using mla_tile::TileWork;

constexpr int kMaxSplits = 8;  // clusters hold at most 8 blocks portably

// Floats per received row of KV values: the pad spreads a warp's 8 rows over the banks.
constexpr int received_stride(int kv) { return kv + 8; }

// What an owner receives (rows, their lse, then its rows' weights and inverse sums) fits in `bytes` of shared
// memory at every split count a cluster takes.
constexpr bool received_fits(int kv, int bytes) {
  for (int splits = 2; splits <= kMaxSplits; ++splits) {
    const int capacity = (mla_tile::kTileEntries + splits - 1) / splits;
    if (splits * capacity * (received_stride(kv) + 1 + 1) * 4 + capacity * 4 > bytes) return false;
  }
  return true;
}

// Where rows go: `capacity` rows per sender at each owner, the partials [sender][row][stride] from `base`, then
// their lse [sender][row].
struct Received {
  uint32_t base;
  int capacity, stride;
  __device__ uint32_t row(int sender, int local) const {
    return base + static_cast<uint32_t>((sender * capacity + local) * stride) * 4u;
  }
  __device__ uint32_t lse(int splits, int sender, int local) const {
    return base + static_cast<uint32_t>((splits * capacity * stride + sender * capacity + local) * 4);
  }
  __device__ uint32_t end(int splits) const { return lse(splits, splits, 0); }
};

template <int KV>
__device__ __forceinline__ Received received_layout(const TileWork& w, int splits, uint32_t base) {
  return Received{base, static_cast<int>(ceil_div(w.count, splits)), received_stride(KV)};
}

// The split that owns entry row `row` of a tile of `count`, and the row's index among that split's rows.
__device__ __forceinline__ int owner_of(int row, int count, int splits, int& local) {
  const int owner = ((row + 1) * splits + count - 1) / count - 1;
  local = row - count * owner / splits;
  return owner;
}

// A thread's two rows (row0 and row0 + 8) of O / l, accumulator tile i holding columns col0 + 8i and + 1 (as
// mla_tile::store_rows writes them), and (with `sends_lse`) their lse, to their owners.
template <int TILES>
__device__ __forceinline__ void send_rows(const TileWork& w, int splits, const Received& to, int row0, int col0,
                                          const float (&o)[TILES][4], const float (&m)[2], float (&l)[2],
                                          bool sends_lse) {
  mla_tile::quad_sum(l);
  const int sender = static_cast<int>(blockIdx.z);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = row0 + 8 * r;
    if (row >= w.count) continue;
    int local;
    const uint32_t owner = owner_of(row, w.count, splits, local);
    const float inv = mla_tile::inverse_sum(l[r]);
    const uint32_t dst = cluster_address(to.row(sender, local) + 4u * col0, owner);
#pragma unroll
    for (int i = 0; i < TILES; ++i) cluster_store(dst + 32u * i, o[i][2 * r] * inv, o[i][2 * r + 1] * inv);
    if (sends_lse) {
      cluster_store(cluster_address(to.lse(splits, sender, local), owner), mla_tile::split_lse(m[r], l[r]));
    }
  }
}

// A split with nothing visible: -inf as the lse of every row, which leaves its partials unread.
__device__ __forceinline__ void send_empty(const TileWork& w, int splits, const Received& to) {
  for (int row = threadIdx.x; row < w.count; row += blockDim.x) {
    int local;
    const uint32_t owner = owner_of(row, w.count, splits, local);
    cluster_store(cluster_address(to.lse(splits, static_cast<int>(blockIdx.z), local), owner), -INFINITY);
  }
}

// This block's rows of the tile, from what the cluster sent it (after the cluster barrier that follows the sends).
// Each of the block's WARPS warps takes a row at a time, lane i its value columns 4i + 128v (v < KV / 128), so
// each load and store of the warp covers a contiguous 512 or 256 bytes.
template <typename T, int KV, int WARPS>
__device__ __forceinline__ void combine_received(const MlaAttentionLaunch& p, const TileWork& w, const Received& from,
                                                 unsigned char* smem) {
  const int splits = p.splits, z = static_cast<int>(blockIdx.z);
  const int first = w.count * z / splits, rows = w.count * (z + 1) / splits - first;
  const auto at = [&](uint32_t address) { return smem + (address - from.base); };
  float* weights = reinterpret_cast<float*>(at(from.end(splits)));  // [rows][splits]
  float* inv = weights + rows * splits;
  const int lane = threadIdx.x & 31;
  for (int r = threadIdx.x >> 5; r < rows; r += WARPS) {
    const auto lse = [&](int sender) { return *reinterpret_cast<const float*>(at(from.lse(splits, sender, r))); };
    const float row_inv = split_combine::warp_weights(splits, lse, weights + r * splits);
    if (lane == 0) inv[r] = row_inv;
  }
  __syncthreads();
  for (int r = threadIdx.x >> 5; r < rows; r += WARPS) {
    const auto partial = [&](int sender, int c) {
      return *reinterpret_cast<const float4*>(at(from.row(sender, r) + 4u * c));
    };
    float4 x[kMaxSplits][KV / 128];
    split_combine::load_partials(splits, partial, 4 * lane, 128, x);
    T* out = static_cast<T*>(p.out) + (w.out_row + first + r) * KV;
    split_combine::store_combined<T>(splits, x, weights + r * splits, inv[r], out, 4 * lane, 128);
  }
}

// The cluster's combine, once this block is done with its KV tiles: after a cluster barrier (every block is done
// with the shared memory at `smem`, which now takes the partials), `send` puts this block's rows in their owners'
// shared memory at the Received it is given; after a second barrier each owner combines its rows.
template <typename T, int KV, int WARPS, typename Send>
__device__ __forceinline__ void combine_in_cluster(const MlaAttentionLaunch& p, const TileWork& w, unsigned char* smem,
                                                   Send send) {
  const Received to = received_layout<KV>(w, p.splits, smem_addr(smem));
  cluster_sync();
  send(to);
  cluster_sync();
  combine_received<T, KV, WARPS>(p, w, to, smem);
}

}  // namespace mtpserve::kernels::cuda::mla_cluster_combine
