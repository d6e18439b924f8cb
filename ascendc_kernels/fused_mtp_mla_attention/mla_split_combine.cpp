// Split-KV combine (AIV only): when a step has fewer (sequence x row-tile) tasks than AI cores
// (batch 1 decode), the host splits each task's KV range over several cores; each split leaves
// unnormalised rows acc_j with (m_j, l_j). Here, per output row:
//   out = sum_j exp(m_j - M) acc_j / sum_j exp(m_j - M) l_j,  M = max_j m_j.
// Work items are (first split's task, row) pairs spread over the vector cores.
#include "kernel_operator.h"
#include "mla_task.h"

namespace mla {

using namespace AscendC;

constexpr uint32_t kMaxSplits = 64;

template <typename T>
class SplitCombine {
 public:
  MLA_AICORE void Init(const MlaTiling& t, GM_ADDR out, GM_ADDR workspace) {
    t_ = t;
    outGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T*>(out));
    partialGm_ = workspace + t.partialOffset;
    pipe_.InitBuffer(part_, 1, t.kvLoraRank * 4);
    pipe_.InitBuffer(stat_, 1, kStatFloats * 4);
    pipe_.InitBuffer(line_, 1, t.kvLoraRank * 2);
    pipe_.InitBuffer(acc_, t.kvLoraRank * 4);
    pipe_.InitBuffer(weights_, kMaxSplits * 4);
    pipe_.InitBuffer(shift_, kMaxSplits * 4);
  }

  MLA_AICORE void Row(const Task& task, int32_t row) {
    float maxes[kMaxSplits], sums[kMaxSplits];
    for (int32_t j = 0; j < task.numSplits; ++j) ReadStat(task.slot + j, row, maxes[j], sums[j]);
    float top = maxes[0];
    for (int32_t j = 1; j < task.numSplits; ++j) top = maxes[j] > top ? maxes[j] : top;
    LocalTensor<float> shift = shift_.template Get<float>();
    for (int32_t j = 0; j < task.numSplits; ++j) shift.SetValue(j, maxes[j] - top);
    SetFlag<HardEvent::S_V>(EVENT_ID0);
    WaitFlag<HardEvent::S_V>(EVENT_ID0);
    LocalTensor<float> w = weights_.template Get<float>();
    Exp(w, shift, task.numSplits);
    SetFlag<HardEvent::V_S>(EVENT_ID0);
    WaitFlag<HardEvent::V_S>(EVENT_ID0);
    float total = 0.0f, weight[kMaxSplits];
    for (int32_t j = 0; j < task.numSplits; ++j) {
      weight[j] = w.GetValue(j);
      total += weight[j] * sums[j];
    }
    LocalTensor<float> acc = acc_.template Get<float>();
    Duplicate(acc, 0.0f, t_.kvLoraRank);
    for (int32_t j = 0; j < task.numSplits; ++j) {
      LocalTensor<float> part = part_.template AllocTensor<float>();
      DataCopy(part, SlotRows(task.slot + j)[row * t_.kvLoraRank], t_.kvLoraRank);
      part_.EnQue(part);
      part = part_.template DeQue<float>();
      Axpy(acc, part, weight[j], t_.kvLoraRank);
      part_.FreeTensor(part);
    }
    Muls(acc, acc, 1.0f / total, t_.kvLoraRank);
    LocalTensor<T> line = line_.template AllocTensor<T>();
    Cast(line, acc, RoundMode::CAST_RINT, t_.kvLoraRank);
    line_.EnQue(line);
    line = line_.template DeQue<T>();
    const int32_t qi = row / task.numH, hi = row % task.numH;
    const uint64_t dst = (static_cast<uint64_t>(task.tokenBase + qi) * t_.numHeads + task.head0 + hi) * t_.kvLoraRank;
    DataCopy(outGm_[dst], line, t_.kvLoraRank);
    line_.FreeTensor(line);
  }

 private:
  MLA_AICORE GlobalTensor<float> SlotRows(int32_t slot) const {
    GlobalTensor<float> g;
    g.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(partialGm_ + static_cast<uint64_t>(slot) * mla_slot_bytes(t_)));
    return g;
  }

  // One 32-byte (max, sum) block GM -> UB, then to scalars.
  MLA_AICORE void ReadStat(int32_t slot, int32_t row, float& m, float& l) {
    LocalTensor<float> s = stat_.template AllocTensor<float>();
    DataCopy(s, SlotRows(slot)[t_.rowsPerTile * t_.kvLoraRank + row * kStatFloats], kStatFloats);
    SetFlag<HardEvent::MTE2_S>(EVENT_ID0);
    WaitFlag<HardEvent::MTE2_S>(EVENT_ID0);
    m = s.GetValue(0);
    l = s.GetValue(1);
    stat_.FreeTensor(s);
  }

  MlaTiling t_;
  TPipe pipe_;
  TQue<TPosition::VECIN, 1> part_, stat_;
  TQue<TPosition::VECOUT, 1> line_;
  TBuf<TPosition::VECCALC> acc_, weights_, shift_;
  GlobalTensor<T> outGm_;
  GM_ADDR partialGm_ = nullptr;
};

// Items: rows of every task that is the first split of a split task, numbered in work-list order.
template <typename T>
MLA_AICORE inline void RunCombine(GM_ADDR workList, GM_ADDR out, GM_ADDR workspace, GM_ADDR tiling) {
  MlaTiling t;
  LoadTiling(t, tiling);
  GlobalTensor<int32_t> list;
  list.SetGlobalBuffer(reinterpret_cast<__gm__ int32_t*>(workList));
  SplitCombine<T> combine;
  combine.Init(t, out, workspace);
  const uint32_t core = GetBlockIdx(), cores = GetBlockNum();
  uint32_t item = 0;
  for (uint32_t i = 0; i < t.numTasks; ++i) {
    const Task task = LoadTask(list, i);
    if (task.slot < 0 || task.splitIdx != 0) continue;
    for (int32_t r = 0; r < task.Rows(); ++r, ++item) {
      if (item % cores == core) combine.Row(task, r);
    }
  }
}

}  // namespace mla

extern "C" __global__ __aicore__ void mla_split_combine_bf16(GM_ADDR workList, GM_ADDR out, GM_ADDR workspace,
                                                            GM_ADDR tiling) {
  KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
  mla::RunCombine<bfloat16_t>(workList, out, workspace, tiling);
}

extern "C" __global__ __aicore__ void mla_split_combine_fp16(GM_ADDR workList, GM_ADDR out, GM_ADDR workspace,
                                                            GM_ADDR tiling) {
  KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
  mla::RunCombine<half>(workList, out, workspace, tiling);
}
