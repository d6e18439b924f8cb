#pragma once
// The contract between the host tiling and the kernel: the tiling struct, the work-list record and
// the on-chip buffer sizes. The kernel sizes its TPipe buffers with mla_buffer_sizes() and the host
// checks the same numbers against the chip's capacities, so the two cannot disagree.
#include <cstdint>

#if defined(__CCE_AICORE__) || defined(__CCE_KT_TEST__)  // device or CANN CPU-debug build
#define MLA_AICORE __aicore__
#else
#define MLA_AICORE
#endif

namespace mla {

// Cross-core flags of the AIC <-> AIV hand-over (CrossCoreSetFlag mode 2).
constexpr uint16_t kFlagScores = 1;  // AIC: S = q.K^T of this KV tile is in the workspace
constexpr uint16_t kFlagProbs = 2;   // AIVs: P = exp(S - m) of this tile is in the workspace
constexpr uint16_t kFlagValues = 3;  // AIC: O = P.V of this tile is in the workspace

constexpr uint32_t kStatFloats = 8;  // per-row (max, sum) record padded to one 32-byte block

// Filled on the host, copied to GM, read word by word by every core.
struct MlaTiling {
  uint32_t numHeads;     // H
  uint32_t headDim;      // D = kvLoraRank + rope (576)
  uint32_t kvLoraRank;   // value width (512)
  uint32_t blockSize;    // cache rows per block
  uint32_t tableWidth;   // block_tables row length
  uint32_t numTasks;     // work-list records
  uint32_t numCores;     // AI cores launched (AIC + 2 AIV each)
  uint32_t rowsPerTile;  // Mt: query rows x heads per task, multiple of 16
  uint32_t kvTile;       // Kt: KV positions per tile, multiple of 16
  uint32_t dChunk;       // K-dim chunk of q.K^T through L0A/L0B
  uint32_t nChunk;       // N-dim chunk of P.V through L0B/L0C
  uint32_t numSlots;     // split-KV partial results
  uint32_t scaleBits;    // softmax scale, float bits
  uint32_t perCoreWorkspace;  // bytes of S, P and O exchange space per AI core
  uint32_t partialOffset;     // bytes from workspace start to the partials
  uint32_t reserved;
};
constexpr uint32_t kTilingWords = sizeof(MlaTiling) / 4;

// One unit of work: rows [q0, q0 + nq) x heads [h0, h0 + nh) of a sequence against KV positions
// [kvBegin, kvEnd). Row i (0-based in the task) sees positions < visibleBase + i.
enum TaskField : uint32_t {
  kSeq, kTokenBase, kNumQ, kHead0, kNumH, kKvBegin, kKvEnd, kVisibleBase, kSlot, kSplitIdx, kNumSplits, kTaskWords = 12
};

struct MlaBufferSizes {
  // AIC
  uint32_t l1Q, l1K, l1P, l0a, l0b, l0c;
  // AIV
  uint32_t ubS, ubP, ubO, ubAcc, ubOut, ubMisc;
  uint32_t l1Total() const { return l1Q + 2 * l1K + l1P; }
  uint32_t l0aTotal() const { return 2 * l0a; }
  uint32_t l0bTotal() const { return 2 * l0b; }
  uint32_t l0cTotal() const { return 2 * l0c; }
  uint32_t ubTotal() const { return ubS + ubP + ubO + ubAcc + ubOut + ubMisc; }
};

MLA_AICORE inline uint32_t mla_max(uint32_t a, uint32_t b) { return a > b ? a : b; }
MLA_AICORE inline uint32_t mla_round32(uint32_t bytes) { return (bytes + 31) / 32 * 32; }

// 16-bit inputs; each AIV owns half of a task's rows.
MLA_AICORE inline MlaBufferSizes mla_buffer_sizes(const MlaTiling& t) {
  const uint32_t mt = t.rowsPerTile, kt = t.kvTile, d = t.headDim, half_rows = (mt + 1) / 2;
  MlaBufferSizes s;
  s.l1Q = mt * d * 2;
  s.l1K = kt * d * 2;  // double-buffered: two of these
  s.l1P = mt * kt * 2;
  s.l0a = mt * mla_max(t.dChunk, kt) * 2;
  s.l0b = mla_max(t.dChunk * kt, kt * t.nChunk) * 2;
  s.l0c = mt * mla_max(kt, t.nChunk) * 4;
  s.ubS = half_rows * kt * 4;
  s.ubP = half_rows * kt * 2;
  s.ubO = half_rows * t.kvLoraRank * 4;
  s.ubAcc = half_rows * t.kvLoraRank * 4;
  s.ubOut = t.kvLoraRank * 2;
  // row maxima/sums (one 32-byte block per row), alpha in/out, reduce work, index and mask rows
  s.ubMisc = 2 * half_rows * kStatFloats * 4 + 2 * mla_round32(half_rows * 4) + mla_round32((kt + 63) / 64 * 4) + 2 * kt * 4;
  return s;
}

// Workspace (bytes) of one AI core: scores [Mt, Kt] fp32, probabilities [Mt, Kt] 16-bit, values [Mt, lora] fp32.
MLA_AICORE inline uint32_t mla_scores_offset(const MlaTiling&) { return 0; }
MLA_AICORE inline uint32_t mla_probs_offset(const MlaTiling& t) { return t.rowsPerTile * t.kvTile * 4; }
MLA_AICORE inline uint32_t mla_values_offset(const MlaTiling& t) { return t.rowsPerTile * t.kvTile * 6; }
MLA_AICORE inline uint32_t mla_core_workspace(const MlaTiling& t) {
  return mla_values_offset(t) + t.rowsPerTile * t.kvLoraRank * 4;
}
// A split's partial: unnormalised output [Mt, lora] fp32, then (max, sum) per row.
MLA_AICORE inline uint32_t mla_slot_bytes(const MlaTiling& t) {
  return t.rowsPerTile * t.kvLoraRank * 4 + t.rowsPerTile * kStatFloats * 4;
}

}  // namespace mla
