#pragma once
// The AIC half of the fused kernel: per KV tile, S = q.K^T and O = P.V on the cube unit.
// Q of the task stays in L1; KV tiles stream GM -> L1 through a two-slot queue so that the next
// tile's copy (MTE2) overlaps this tile's matmuls; the cube's results go to this core's GM
// workspace, where the two AIVs read them (Atlas A2 has no L0C -> UB path).
#include "mla_task.h"

namespace mla {

using namespace AscendC;

template <typename T>
class CubeStage {
 public:
  MLA_AICORE void Init(const MlaTiling& t, GM_ADDR q, GM_ADDR cache, GM_ADDR blockTables, GM_ADDR workspace,
                       uint32_t core) {
    t_ = t;
    qGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T*>(q));
    cacheGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T*>(cache));
    tableGm_.SetGlobalBuffer(reinterpret_cast<__gm__ int32_t*>(blockTables));
    GM_ADDR mine = workspace + static_cast<uint64_t>(core) * t.perCoreWorkspace;
    scoresGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(mine + mla_scores_offset(t)));
    probsGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T*>(mine + mla_probs_offset(t)));
    valuesGm_.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(mine + mla_values_offset(t)));
    const MlaBufferSizes s = mla_buffer_sizes(t);
    pipe_.InitBuffer(qL1_, s.l1Q);
    pipe_.InitBuffer(kvL1_, 2, s.l1K);
    pipe_.InitBuffer(pL1_, s.l1P);
    pipe_.InitBuffer(aL0_, 2, s.l0a);
    pipe_.InitBuffer(bL0_, 2, s.l0b);
    pipe_.InitBuffer(cL0_, 2, s.l0c);
  }

  MLA_AICORE void Run(const Task& task) {
    rows_ = task.Rows();
    rowsPad_ = (rows_ + 15) / 16 * 16;
    LoadQuery(task);
    const int32_t tiles = (task.kvEnd - task.kvBegin + t_.kvTile - 1) / t_.kvTile;
    CopyKvTile(task, task.kvBegin);
    for (int32_t i = 0; i < tiles; ++i) {
      LocalTensor<T> kv = kvL1_.template DeQue<T>();
      if (i + 1 < tiles) CopyKvTile(task, task.kvBegin + (i + 1) * t_.kvTile);  // prefetch: the second slot
      Scores(kv);
      CrossCoreSetFlag<2, PIPE_FIX>(kFlagScores);
      CrossCoreWaitFlag(kFlagProbs);
      LoadProbs();
      Values(kv);
      CrossCoreSetFlag<2, PIPE_FIX>(kFlagValues);
      kvL1_.FreeTensor(kv);
    }
  }

 private:
  // Q rows (query i, head h) -> L1 NZ, row index i * nh + h. One ND2NZ per query row: the source
  // stride between query rows (H * D elements) exceeds ND2NZ's 16-bit srcNdMatrixStride for H = 128.
  MLA_AICORE void LoadQuery(const Task& task) {
    LocalTensor<T> q = qL1_.template Get<T>();
    for (int32_t i = 0; i < task.numQ; ++i) {
      const uint64_t src = (static_cast<uint64_t>(task.tokenBase + i) * t_.numHeads + task.head0) * t_.headDim;
      DataCopy(q[i * task.numH * 16], qGm_[src],
               Nd2NzParams(1, task.numH, t_.headDim, 0, t_.headDim, rowsPad_, 1, 0));
    }
    SetFlag<HardEvent::MTE2_MTE1>(EVENT_ID0);
    WaitFlag<HardEvent::MTE2_MTE1>(EVENT_ID0);
  }

  // Positions [p0, p0 + Kt) of the sequence -> L1 NZ [D / 16][Kt][16], one ND2NZ per run of
  // positions inside one cache block. A short last tile is zeroed first: its missing rows meet
  // P = 0 in P.V, and 0 * (stale NaN) would not be 0.
  MLA_AICORE void CopyKvTile(const Task& task, int32_t p0) {
    LocalTensor<T> kv = kvL1_.template AllocTensor<T>();
    const int32_t valid = task.kvEnd - p0 < static_cast<int32_t>(t_.kvTile) ? task.kvEnd - p0 : t_.kvTile;
    if (valid < static_cast<int32_t>(t_.kvTile)) {
      InitConstValue(kv, InitConstValueParams<T>(1, t_.kvTile * t_.headDim * 2 / 32, 0, T(0.0f)));
    }
    const uint64_t tableRow = static_cast<uint64_t>(task.seq) * t_.tableWidth;
    for (int32_t pos = p0; pos < p0 + valid;) {
      const int32_t block = tableGm_.GetValue(tableRow + pos / t_.blockSize);
      const int32_t inBlock = pos % t_.blockSize;
      int32_t run = t_.blockSize - inBlock;
      if (run > p0 + valid - pos) run = p0 + valid - pos;
      const uint64_t src = (static_cast<uint64_t>(block) * t_.blockSize + inBlock) * t_.headDim;
      DataCopy(kv[(pos - p0) * 16], cacheGm_[src], Nd2NzParams(1, run, t_.headDim, 0, t_.headDim, t_.kvTile, 1, 0));
      pos += run;
    }
    kvL1_.EnQue(kv);
  }

  // S [rows, Kt] = Q [rows, D] . K^T, accumulated over D in chunks through L0A/L0B.
  MLA_AICORE void Scores(const LocalTensor<T>& kv) {
    const uint32_t m1 = rowsPad_ / 16, kt1 = t_.kvTile / 16;
    LocalTensor<T> q = qL1_.template Get<T>();
    LocalTensor<float> c = cL0_.template AllocTensor<float>();
    for (uint32_t d0 = 0; d0 < t_.headDim; d0 += t_.dChunk) {
      const uint32_t dc = t_.headDim - d0 < t_.dChunk ? t_.headDim - d0 : t_.dChunk, dc1 = dc / 16, d01 = d0 / 16;
      LocalTensor<T> a = aL0_.template AllocTensor<T>();
      for (uint32_t i = 0; i < m1; ++i) {  // Q NZ -> Zz: fractal row i, K fractals d01 .. d01 + dc1
        LoadData(a[i * dc1 * 256], q, LoadData2DParams(d01 * m1 + i, dc1, m1, 0, 0, false, 0));
      }
      aL0_.EnQue(a);
      LocalTensor<T> b = bL0_.template AllocTensor<T>();
      // K tile NZ fractals (kt1, d1) sit at d1 * Kt1 + kt1 with rows kt and columns d inside: that
      // is already K^T in Zn, contiguous for a D chunk.
      LoadData(b, kv, LoadData2DParams(d01 * kt1, dc1 * kt1, 1, 0, 0, false, 0));
      bL0_.EnQue(b);
      a = aL0_.template DeQue<T>();
      b = bL0_.template DeQue<T>();
      Mmad(c, a, b, MmadParams(rows_, t_.kvTile, dc, 0, false, d0 == 0));
      aL0_.FreeTensor(a);
      bL0_.FreeTensor(b);
    }
    cL0_.EnQue(c);
    c = cL0_.template DeQue<float>();
    Fixpipe(scoresGm_, c,
            FixpipeParamsV220(t_.kvTile, rows_, rowsPad_, t_.kvTile, false, QuantMode_t::NoQuant, 0, 1, 0, 0, 0));
    cL0_.FreeTensor(c);
  }

  // P [rows, Kt] (written by the AIVs) GM -> L1 NZ.
  MLA_AICORE void LoadProbs() {
    LocalTensor<T> p = pL1_.template Get<T>();
    DataCopy(p, probsGm_, Nd2NzParams(1, rows_, t_.kvTile, 0, t_.kvTile, rowsPad_, 1, 0));
    SetFlag<HardEvent::MTE2_MTE1>(EVENT_ID1);
    WaitFlag<HardEvent::MTE2_MTE1>(EVENT_ID1);
  }

  // O [rows, lora] = P [rows, Kt] . V [Kt, lora], V = the tile's first lora columns, in N chunks.
  MLA_AICORE void Values(const LocalTensor<T>& kv) {
    const uint32_t m1 = rowsPad_ / 16, kt1 = t_.kvTile / 16, nc1 = t_.nChunk / 16;
    LocalTensor<T> p = pL1_.template Get<T>();
    LocalTensor<T> a = aL0_.template AllocTensor<T>();
    for (uint32_t i = 0; i < m1; ++i) {  // P NZ -> Zz
      LoadData(a[i * kt1 * 256], p, LoadData2DParams(i, kt1, m1, 0, 0, false, 0));
    }
    aL0_.EnQue(a);
    a = aL0_.template DeQue<T>();
    for (uint32_t n0 = 0; n0 < t_.kvLoraRank; n0 += t_.nChunk) {
      LocalTensor<T> b = bL0_.template AllocTensor<T>();
      for (uint32_t i = 0; i < kt1; ++i) {  // V NZ -> Zn: transpose each fractal
        LoadData(b[i * nc1 * 256], kv, LoadData2DParams((n0 / 16) * kt1 + i, nc1, kt1, 0, 0, true, 0));
      }
      bL0_.EnQue(b);
      b = bL0_.template DeQue<T>();
      LocalTensor<float> c = cL0_.template AllocTensor<float>();
      Mmad(c, a, b, MmadParams(rows_, t_.nChunk, t_.kvTile, 0, false, true));
      bL0_.FreeTensor(b);
      cL0_.EnQue(c);
      c = cL0_.template DeQue<float>();
      Fixpipe(valuesGm_[n0], c,
              FixpipeParamsV220(t_.nChunk, rows_, rowsPad_, t_.kvLoraRank, false, QuantMode_t::NoQuant, 0, 1, 0, 0, 0));
      cL0_.FreeTensor(c);
    }
    aL0_.FreeTensor(a);
    // The next tile's LoadProbs (MTE2) overwrites P in L1 that these loads (MTE1) read.
    SetFlag<HardEvent::MTE1_MTE2>(EVENT_ID2);
    WaitFlag<HardEvent::MTE1_MTE2>(EVENT_ID2);
  }

  MlaTiling t_;
  uint32_t rows_ = 0, rowsPad_ = 0;
  TPipe pipe_;
  TBuf<TPosition::A1> qL1_, pL1_;
  TQue<TPosition::A1, 2> kvL1_;
  TQue<TPosition::A2, 2> aL0_;
  TQue<TPosition::B2, 2> bL0_;
  TQue<TPosition::CO1, 2> cL0_;
  GlobalTensor<T> qGm_, cacheGm_, probsGm_;
  GlobalTensor<int32_t> tableGm_;
  GlobalTensor<float> scoresGm_, valuesGm_;
};

}  // namespace mla
