#pragma once
// Host side of the kernel: the chip description, the per-step work list (sequences x row tiles x
// KV splits over AI cores) and the capacity check of the tile sizes. Plain C++: the NPU host path
// and the CPU shim's entry both call it.
#include <cstdint>
#include <string>
#include <vector>

#include "mla_tiling.h"

namespace mla {

// Atlas A2 (Ascend910B). Buffer sizes: asc-tools cpudebug/src/api_check/inc/ascend910B1_ini.h.
// AI cores: 24 on the 910B1/B2 of Atlas 800T/800I A2 (20 on a 910B3/B4); on a device the NPU host
// path should pass platform_ascendc::PlatformAscendC::GetCoreNumAic() instead.
struct ChipSpec {
  uint32_t aiCores = 24;
  uint32_t l1 = 512 * 1024, l0a = 64 * 1024, l0b = 64 * 1024, l0c = 128 * 1024, ub = 192 * 1024;
};

struct MlaShape {
  uint32_t numHeads, kvLoraRank, ropeDim, blockSize, tableWidth;
  float scale;
};

struct MlaTileConfig {
  uint32_t rowsPerTile = 64;  // largest tile whose AIV half fits UB (acc + P.V rows, fp32)
  uint32_t kvTile = 128;
  uint32_t dChunk = 128;
  uint32_t nChunk = 128;
  bool splitKv = true;       // split KV over idle cores when tasks < cores, then combine
};

struct MlaPlan {
  MlaTiling tiling{};
  std::vector<int32_t> tasks;  // numTasks x kTaskWords
  uint64_t workspaceBytes = 0;
  bool needsCombine = false;
};

// Empty string when the tiles fit every buffer of `chip`, else what overflows and by how much.
std::string check_capacity(const MlaTiling& t, const ChipSpec& chip);

// Returns an empty string and fills `plan`, or the reason the step cannot be tiled.
std::string plan_mla_attention(const MlaShape& shape, const int32_t* queryStart, const int32_t* contextLens,
                               uint32_t numSeqs, const ChipSpec& chip, const MlaTileConfig& cfg, bool checkCapacity,
                               MlaPlan& plan);

}  // namespace mla
