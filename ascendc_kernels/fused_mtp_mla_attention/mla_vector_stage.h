#pragma once
// The AIV half of the fused kernel: the online softmax. Each of the two AIVs of an AI core owns
// half of the task's rows; per KV tile it scales and masks S, updates the running row maxima,
// writes P = exp(S - m) for the cube, then folds the cube's P.V into its fp32 accumulator with
// alpha = exp(m_old - m_new). At the end it normalises and writes the output rows, or (split KV)
// writes the unnormalised partial plus (max, sum) for mla_split_combine.
#include "mla_task.h"

namespace mla {

using namespace AscendC;

constexpr float kMaskedScore = -1.0e30f;  // exp() of it is 0 next to any real score
constexpr uint32_t kMaxRowsPerAiv = 64;

template <typename T>
class VectorStage {
 public:
  MLA_AICORE void Init(const MlaTiling& t, GM_ADDR out, GM_ADDR workspace, uint32_t core, uint32_t sub) {
    t_ = t;
    sub_ = sub;
    scale_ = FloatFromBits(t.scaleBits);
    outGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T*>(out));
    GM_ADDR mine = workspace + static_cast<uint64_t>(core) * t.perCoreWorkspace;
    scoresGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(mine + mla_scores_offset(t)));
    probsGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T*>(mine + mla_probs_offset(t)));
    valuesGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(mine + mla_values_offset(t)));
    partialGm_ = workspace + t.partialOffset;
    const MlaBufferSizes s = mla_buffer_sizes(t);
    const uint32_t halfRows = (t.rowsPerTile + 1) / 2;
    pipe_.InitBuffer(sIn_, 1, s.ubS);
    pipe_.InitBuffer(pOut_, 1, s.ubP);
    pipe_.InitBuffer(oIn_, 1, s.ubO);
    pipe_.InitBuffer(acc_, s.ubAcc);
    pipe_.InitBuffer(rowOut_, 1, s.ubOut);
    pipe_.InitBuffer(red_, halfRows * kStatFloats * 4);
    pipe_.InitBuffer(stat_, halfRows * kStatFloats * 4);
    pipe_.InitBuffer(diff_, mla_round32(halfRows * 4));
    pipe_.InitBuffer(alpha_, mla_round32(halfRows * 4));
    pipe_.InitBuffer(work_, mla_round32((t.kvTile + 63) / 64 * 4));
    pipe_.InitBuffer(index_, t.kvTile * 4);
    pipe_.InitBuffer(bias_, t.kvTile * 4);
    CreateVecIndex(index_.template Get<float>(), 0.0f, t.kvTile);
  }

  MLA_AICORE void Run(const Task& task) {
    const int32_t rows = task.Rows(), half = (rows + 1) / 2;
    row0_ = sub_ * half;
    myRows_ = rows - row0_ < half ? rows - row0_ : half;
    if (myRows_ < 0) myRows_ = 0;
    if (myRows_ > 0) StartRows();
    const int32_t tiles = (task.kvEnd - task.kvBegin + t_.kvTile - 1) / t_.kvTile;
    for (int32_t i = 0; i < tiles; ++i) {
      const int32_t p0 = task.kvBegin + i * t_.kvTile;
      CrossCoreWaitFlag(kFlagScores);
      if (myRows_ > 0) Softmax(task, p0);
      CrossCoreSetFlag<2, PIPE_MTE3>(kFlagProbs);  // both AIVs set, even one without rows
      CrossCoreWaitFlag(kFlagValues);
      if (myRows_ > 0) Accumulate();
    }
    if (myRows_ == 0) return;
    if (task.slot < 0) {
      WriteOutput(task);
    } else {
      WritePartial(task);
    }
  }

 private:
  MLA_AICORE void StartRows() {
    Duplicate(acc_.template Get<float>(), 0.0f, myRows_ * t_.kvLoraRank);
    for (int32_t r = 0; r < myRows_; ++r) {
      rowMax_[r] = kMaskedScore;
      rowSum_[r] = 0.0f;
    }
  }

  // Row r of the task (query r / nh) sees positions < visibleBase + r / nh, and none past kvEnd.
  MLA_AICORE int32_t VisibleInTile(const Task& task, int32_t r, int32_t p0) const {
    int32_t v = task.visibleBase + r / task.numH;
    if (v > task.kvEnd) v = task.kvEnd;
    v -= p0;
    return v < 0 ? 0 : v;
  }

  MLA_AICORE void Softmax(const Task& task, int32_t p0) {
    const uint32_t kt = t_.kvTile;
    LocalTensor<float> s = sIn_.template AllocTensor<float>();
    DataCopy(s, scoresGm_[row0_ * kt], myRows_ * kt);
    sIn_.EnQue(s);
    s = sIn_.template DeQue<float>();
    Muls(s, s, scale_, myRows_ * kt);
    LocalTensor<float> red = red_.template Get<float>();
    for (int32_t r = 0; r < myRows_; ++r) {
      const int32_t visible = VisibleInTile(task, row0_ + r, p0);
      if (visible < static_cast<int32_t>(kt)) MaskTail(s[r * kt], visible);
      ReduceMax(red[r * kStatFloats], s[r * kt], work_.template Get<float>(), kt);
    }
    // New maxima on the scalar unit, alpha = exp(m_old - m_new) on the vector unit.
    SetFlag<HardEvent::V_S>(EVENT_ID0);
    WaitFlag<HardEvent::V_S>(EVENT_ID0);
    LocalTensor<float> diff = diff_.template Get<float>();
    for (int32_t r = 0; r < myRows_; ++r) {
      const float tileMax = red.GetValue(r * kStatFloats);
      const float newMax = tileMax > rowMax_[r] ? tileMax : rowMax_[r];
      diff.SetValue(r, rowMax_[r] - newMax);
      rowMax_[r] = newMax;
    }
    SetFlag<HardEvent::S_V>(EVENT_ID0);
    WaitFlag<HardEvent::S_V>(EVENT_ID0);
    Exp(alpha_.template Get<float>(), diff, myRows_);
    for (int32_t r = 0; r < myRows_; ++r) Adds(s[r * kt], s[r * kt], -rowMax_[r], kt);
    Exp(s, s, myRows_ * kt);
    for (int32_t r = 0; r < myRows_; ++r) ReduceSum(red[r * kStatFloats], s[r * kt], work_.template Get<float>(), kt);
    LocalTensor<T> p = pOut_.template AllocTensor<T>();
    Cast(p, s, RoundMode::CAST_RINT, myRows_ * kt);
    sIn_.FreeTensor(s);
    pOut_.EnQue(p);
    p = pOut_.template DeQue<T>();
    DataCopy(probsGm_[row0_ * kt], p, myRows_ * kt);
    pOut_.FreeTensor(p);
    SetFlag<HardEvent::V_S>(EVENT_ID1);
    WaitFlag<HardEvent::V_S>(EVENT_ID1);
    LocalTensor<float> alpha = alpha_.template Get<float>();
    for (int32_t r = 0; r < myRows_; ++r) {
      rowAlpha_[r] = alpha.GetValue(r);
      rowSum_[r] = rowSum_[r] * rowAlpha_[r] + red.GetValue(r * kStatFloats);
    }
  }

  // Adds kMaskedScore * (j - visible + 0.5) to columns j >= visible: 0 elsewhere, with no
  // unaligned partial-row writes (vector operands must start on 32-byte boundaries).
  MLA_AICORE void MaskTail(const LocalTensor<float>& row, int32_t visible) {
    const uint32_t kt = t_.kvTile;
    LocalTensor<float> bias = bias_.template Get<float>();
    Adds(bias, index_.template Get<float>(), 0.5f - static_cast<float>(visible), kt);
    Maxs(bias, bias, 0.0f, kt);
    Muls(bias, bias, kMaskedScore, kt);
    Add(row, row, bias, kt);
  }

  MLA_AICORE void Accumulate() {
    const uint32_t lora = t_.kvLoraRank;
    LocalTensor<float> o = oIn_.template AllocTensor<float>();
    DataCopy(o, valuesGm_[row0_ * lora], myRows_ * lora);
    oIn_.EnQue(o);
    o = oIn_.template DeQue<float>();
    LocalTensor<float> acc = acc_.template Get<float>();
    for (int32_t r = 0; r < myRows_; ++r) {
      Muls(acc[r * lora], acc[r * lora], rowAlpha_[r], lora);
      Add(acc[r * lora], acc[r * lora], o[r * lora], lora);
    }
    oIn_.FreeTensor(o);
  }

  MLA_AICORE void WriteOutput(const Task& task) {
    const uint32_t lora = t_.kvLoraRank;
    LocalTensor<float> acc = acc_.template Get<float>();
    for (int32_t r = 0; r < myRows_; ++r) {
      const int32_t row = row0_ + r, qi = row / task.numH, hi = row % task.numH;
      Muls(acc[r * lora], acc[r * lora], 1.0f / rowSum_[r], lora);
      LocalTensor<T> line = rowOut_.template AllocTensor<T>();
      Cast(line, acc[r * lora], RoundMode::CAST_RINT, lora);
      rowOut_.EnQue(line);
      line = rowOut_.template DeQue<T>();
      const uint64_t dst = (static_cast<uint64_t>(task.tokenBase + qi) * t_.numHeads + task.head0 + hi) * lora;
      DataCopy(outGm_[dst], line, lora);
      rowOut_.FreeTensor(line);
    }
  }

  // Unnormalised rows and one (max, sum) block per row into this split's slot.
  MLA_AICORE void WritePartial(const Task& task) {
    const uint32_t lora = t_.kvLoraRank;
    GM_ADDR slot = partialGm_ + static_cast<uint64_t>(task.slot) * mla_slot_bytes(t_);
    GlobalTensor<float> accGm, statGm;
    accGm.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(slot));
    statGm.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(slot + t_.rowsPerTile * lora * 4));
    LocalTensor<float> stat = stat_.template Get<float>();
    for (int32_t r = 0; r < myRows_; ++r) {
      stat.SetValue(r * kStatFloats, rowMax_[r]);
      stat.SetValue(r * kStatFloats + 1, rowSum_[r]);
    }
    SetFlag<HardEvent::S_MTE3>(EVENT_ID0);
    WaitFlag<HardEvent::S_MTE3>(EVENT_ID0);
    DataCopy(statGm[row0_ * kStatFloats], stat, myRows_ * kStatFloats);
    SetFlag<HardEvent::V_MTE3>(EVENT_ID0);
    WaitFlag<HardEvent::V_MTE3>(EVENT_ID0);
    DataCopy(accGm[row0_ * lora], acc_.template Get<float>(), myRows_ * lora);
  }

  MlaTiling t_;
  uint32_t sub_ = 0;
  int32_t row0_ = 0, myRows_ = 0;
  float scale_ = 1.0f;
  float rowMax_[kMaxRowsPerAiv], rowSum_[kMaxRowsPerAiv], rowAlpha_[kMaxRowsPerAiv];
  TPipe pipe_;
  TQue<TPosition::VECIN, 1> sIn_, oIn_;
  TQue<TPosition::VECOUT, 1> pOut_, rowOut_;
  TBuf<TPosition::VECCALC> acc_, red_, stat_, diff_, alpha_, work_, index_, bias_;
  GlobalTensor<T> outGm_, probsGm_;
  GlobalTensor<float> scoresGm_, valuesGm_;
  GM_ADDR partialGm_ = nullptr;
};

}  // namespace mla
