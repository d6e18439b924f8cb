#include "mla_host_tiling.h"

#include <algorithm>
#include <cstring>

namespace mla {

namespace {

std::string over(const char* what, uint64_t need, uint64_t have) {
  return std::string(what) + " needs " + std::to_string(need) + " bytes, the chip has " + std::to_string(have);
}

uint32_t ceil_div(uint64_t a, uint64_t b) { return static_cast<uint32_t>((a + b - 1) / b); }

std::string check_shape(const MlaShape& s, const MlaTileConfig& c) {
  if (c.rowsPerTile == 0 || c.rowsPerTile % 16 || c.rowsPerTile > 128) return "rowsPerTile must be 16..128, a multiple of 16";
  if (c.kvTile == 0 || c.kvTile % 16 || c.kvTile > 496) return "kvTile must be a multiple of 16, at most 496";
  if (c.dChunk == 0 || c.dChunk % 16 || c.nChunk == 0 || c.nChunk % 16) return "dChunk and nChunk must be multiples of 16";
  if ((s.kvLoraRank + s.ropeDim) % 16 || s.kvLoraRank % c.nChunk) return "head dim must be a multiple of 16 and lora of nChunk";
  if (s.blockSize == 0 || s.numHeads == 0) return "block size and heads must be positive";
  return "";
}

}  // namespace

std::string check_capacity(const MlaTiling& t, const ChipSpec& chip) {
  const MlaBufferSizes s = mla_buffer_sizes(t);
  if (s.l1Total() > chip.l1) return over("L1 (Q + 2 KV tiles + P)", s.l1Total(), chip.l1);
  if (s.l0aTotal() > chip.l0a) return over("L0A (2 A tiles)", s.l0aTotal(), chip.l0a);
  if (s.l0bTotal() > chip.l0b) return over("L0B (2 B tiles)", s.l0bTotal(), chip.l0b);
  if (s.l0cTotal() > chip.l0c) return over("L0C (2 fp32 C tiles)", s.l0cTotal(), chip.l0c);
  // TPipe rounds every buffer to 32 bytes; the sizes above are multiples of 32 already.
  if (s.ubTotal() > chip.ub) return over("UB (S, P, P.V rows, accumulator, stats)", s.ubTotal(), chip.ub);
  return "";
}

std::string plan_mla_attention(const MlaShape& shape, const int32_t* queryStart, const int32_t* contextLens,
                               uint32_t numSeqs, const ChipSpec& chip, const MlaTileConfig& cfg, bool checkCapacity,
                               MlaPlan& plan) {
  if (auto err = check_shape(shape, cfg); !err.empty()) return err;
  MlaTiling& t = plan.tiling;
  t = MlaTiling{};
  t.numHeads = shape.numHeads;
  t.headDim = shape.kvLoraRank + shape.ropeDim;
  t.kvLoraRank = shape.kvLoraRank;
  t.blockSize = shape.blockSize;
  t.tableWidth = shape.tableWidth;
  t.rowsPerTile = cfg.rowsPerTile;
  t.kvTile = cfg.kvTile;
  t.dChunk = cfg.dChunk;
  t.nChunk = cfg.nChunk;
  std::memcpy(&t.scaleBits, &shape.scale, 4);
  if (checkCapacity) {
    if (auto err = check_capacity(t, chip); !err.empty()) return "tiling rejected: " + err;
  }

  // Row tiles: all query rows of a short (decode / verify) query with as many heads as fit, so the
  // k + 1 rows share each KV read; a long query is cut into row chunks of one head group.
  struct Base { int32_t seq, token, nq, h0, nh, visibleBase, kvEnd; };
  std::vector<Base> bases;
  for (uint32_t s = 0; s < numSeqs; ++s) {
    const int32_t n = queryStart[s + 1] - queryStart[s], c = contextLens[s];
    if (n <= 0) continue;
    if (c < n) return "sequence " + std::to_string(s) + ": context shorter than its query";
    const int32_t rows = static_cast<int32_t>(cfg.rowsPerTile);
    const int32_t nh = std::min<int32_t>(shape.numHeads, std::max(1, rows / n));
    const int32_t nq = std::min(n, rows / nh);
    for (int32_t q0 = 0; q0 < n; q0 += nq) {
      const int32_t rowsHere = std::min(nq, n - q0);
      for (int32_t h0 = 0; h0 < static_cast<int32_t>(shape.numHeads); h0 += nh) {
        bases.push_back({static_cast<int32_t>(s), queryStart[s] + q0, rowsHere, h0,
                         std::min<int32_t>(nh, shape.numHeads - h0), c - n + q0 + 1, c - n + q0 + rowsHere});
      }
    }
  }

  // Split KV when the tasks leave AI cores idle (batch 1 decode): each split takes whole KV tiles
  // of the positions every row of the task sees, so no split is empty for any row; the last split
  // also takes the tail that only the later MTP rows see.
  const uint32_t wanted = cfg.splitKv && !bases.empty() && bases.size() < chip.aiCores
                              ? ceil_div(chip.aiCores, bases.size()) : 1;
  plan.tasks.clear();
  uint32_t slots = 0;
  for (const Base& b : bases) {
    const uint32_t commonTiles = ceil_div(b.visibleBase, cfg.kvTile);
    uint32_t splits = std::min(wanted, commonTiles);
    const uint32_t perSplit = ceil_div(commonTiles, std::max(1u, splits));
    splits = ceil_div(commonTiles, perSplit);
    for (uint32_t j = 0; j < splits; ++j) {
      const int32_t begin = static_cast<int32_t>(j * perSplit * cfg.kvTile);
      const int32_t end = j + 1 == splits ? b.kvEnd : static_cast<int32_t>((j + 1) * perSplit * cfg.kvTile);
      int32_t rec[kTaskWords] = {};
      rec[kSeq] = b.seq;
      rec[kTokenBase] = b.token;
      rec[kNumQ] = b.nq;
      rec[kHead0] = b.h0;
      rec[kNumH] = b.nh;
      rec[kKvBegin] = begin;
      rec[kKvEnd] = end;
      rec[kVisibleBase] = b.visibleBase;
      rec[kSlot] = splits > 1 ? static_cast<int32_t>(slots + j) : -1;
      rec[kSplitIdx] = static_cast<int32_t>(j);
      rec[kNumSplits] = static_cast<int32_t>(splits);
      plan.tasks.insert(plan.tasks.end(), rec, rec + kTaskWords);
    }
    if (splits > 1) slots += splits;
  }
  t.numTasks = static_cast<uint32_t>(plan.tasks.size() / kTaskWords);
  t.numCores = std::max(1u, std::min(chip.aiCores, t.numTasks));
  t.numSlots = slots;
  t.perCoreWorkspace = mla_core_workspace(t);
  t.partialOffset = t.numCores * t.perCoreWorkspace;
  plan.workspaceBytes = static_cast<uint64_t>(t.partialOffset) + static_cast<uint64_t>(slots) * mla_slot_bytes(t);
  plan.needsCombine = slots > 0;
  return "";
}

}  // namespace mla
