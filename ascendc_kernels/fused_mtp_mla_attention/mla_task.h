#pragma once
// Reading the tiling and the work list from GM inside a kernel.
#include "kernel_operator.h"
#include "mla_tiling.h"

namespace mla {

struct Task {
  int32_t seq, tokenBase, numQ, head0, numH, kvBegin, kvEnd, visibleBase, slot, splitIdx, numSplits;
  MLA_AICORE int32_t Rows() const { return numQ * numH; }
};

// The tiling lives in GM; every core copies it word by word into its scalar registers/stack.
MLA_AICORE inline void LoadTiling(MlaTiling& t, GM_ADDR tiling) {
  const __gm__ uint32_t* src = reinterpret_cast<const __gm__ uint32_t*>(tiling);
  uint32_t* dst = reinterpret_cast<uint32_t*>(&t);
  for (uint32_t i = 0; i < kTilingWords; ++i) dst[i] = src[i];
}

MLA_AICORE inline Task LoadTask(const AscendC::GlobalTensor<int32_t>& list, uint32_t index) {
  const uint64_t b = static_cast<uint64_t>(index) * kTaskWords;
  Task t;
  t.seq = list.GetValue(b + kSeq);
  t.tokenBase = list.GetValue(b + kTokenBase);
  t.numQ = list.GetValue(b + kNumQ);
  t.head0 = list.GetValue(b + kHead0);
  t.numH = list.GetValue(b + kNumH);
  t.kvBegin = list.GetValue(b + kKvBegin);
  t.kvEnd = list.GetValue(b + kKvEnd);
  t.visibleBase = list.GetValue(b + kVisibleBase);
  t.slot = list.GetValue(b + kSlot);
  t.splitIdx = list.GetValue(b + kSplitIdx);
  t.numSplits = list.GetValue(b + kNumSplits);
  return t;
}

MLA_AICORE inline float FloatFromBits(uint32_t bits) {
  union {
    uint32_t u;
    float f;
  } v;
  v.u = bits;
  return v.f;
}

}  // namespace mla
