#pragma once
// Cube-unit (AIC) data path of Atlas A2: GM -> L1 with ND->NZ conversion (MTE2), L1 -> L0A/L0B
// fractal loads (MTE1), Mmad into L0C (M), Fixpipe L0C -> GM with NZ->ND conversion (FIX).
// Layouts are the chip's fractal layouts for 16-bit inputs, so a kernel that feeds the cube the
// wrong layout computes the wrong product here too:
//   L1 "NZ" of a [rows, cols] matrix:  ((col / 16) * rowStride + row) * 16 + col % 16
//   L0A "Zz" for A[m, k]:               fractal (m / 16, k / 16) row-major, inside row-major
//   L0B "Zn" for B[k, n]:               fractal (k / 16, n / 16) row-major, inside column-major
//   L0C "NZ" fp32 C[m, n]:              ((n / 16) * ceil16(m) + m) * 16 + n % 16
#include <vector>

#include "shim_memory.h"

enum class QuantMode_t { NoQuant, F322F16, F322BF16 };

namespace AscendC {

struct Nd2NzParams {
  Nd2NzParams() = default;
  Nd2NzParams(uint16_t ndNumIn, uint16_t nValueIn, uint16_t dValueIn, uint16_t srcNdMatrixStrideIn, uint16_t srcDValueIn,
              uint16_t dstNzC0StrideIn, uint16_t dstNzNStrideIn, uint16_t dstNzMatrixStrideIn)
      : ndNum(ndNumIn), nValue(nValueIn), dValue(dValueIn), srcNdMatrixStride(srcNdMatrixStrideIn),
        srcDValue(srcDValueIn), dstNzC0Stride(dstNzC0StrideIn), dstNzNStride(dstNzNStrideIn),
        dstNzMatrixStride(dstNzMatrixStrideIn) {}
  uint16_t ndNum = 0, nValue = 0, dValue = 0, srcNdMatrixStride = 0, srcDValue = 0;
  uint16_t dstNzC0Stride = 0, dstNzNStride = 0, dstNzMatrixStride = 0;
};

struct LoadData2DParams {
  LoadData2DParams() = default;
  LoadData2DParams(uint16_t startIndexIn, uint8_t repeatTimesIn, uint16_t srcStrideIn, uint8_t sidIn, uint16_t dstGapIn,
                   bool ifTransposeIn, uint8_t addrModeIn)
      : startIndex(startIndexIn), repeatTimes(repeatTimesIn), srcStride(srcStrideIn), sid(sidIn), dstGap(dstGapIn),
        ifTranspose(ifTransposeIn), addrMode(addrModeIn) {}
  uint16_t startIndex = 0;
  uint8_t repeatTimes = 0;
  uint16_t srcStride = 0;
  uint8_t sid = 0;
  uint16_t dstGap = 0;
  bool ifTranspose = false;
  uint8_t addrMode = 0;
};

struct MmadParams {
  MmadParams() = default;
  MmadParams(uint16_t mIn, uint16_t nIn, uint16_t kIn, uint8_t unitFlagIn, bool cmatrixSourceIn, bool cmatrixInitValIn)
      : m(mIn), n(nIn), k(kIn), unitFlag(unitFlagIn), cmatrixSource(cmatrixSourceIn), cmatrixInitVal(cmatrixInitValIn) {}
  uint16_t m = 0, n = 0, k = 0;
  uint8_t unitFlag = 0;
  bool cmatrixSource = false, cmatrixInitVal = true;
};

struct FixpipeParamsV220 {
  FixpipeParamsV220() = default;
  FixpipeParamsV220(uint16_t nSizeIn, uint16_t mSizeIn, uint16_t srcStrideIn, uint32_t dstStrideIn, bool reluEnIn,
                    QuantMode_t quantPreIn, int64_t deqScalarIn, uint16_t ndNumIn, uint16_t srcNdStrideIn,
                    uint16_t dstNdStrideIn, uint8_t unitFlagIn)
      : nSize(nSizeIn), mSize(mSizeIn), srcStride(srcStrideIn), dstStride(dstStrideIn), reluEn(reluEnIn),
        quantPre(quantPreIn), deqScalar(deqScalarIn), ndNum(ndNumIn), srcNdStride(srcNdStrideIn),
        dstNdStride(dstNdStrideIn), unitFlag(unitFlagIn) {}
  uint16_t nSize = 0, mSize = 0, srcStride = 0;
  uint32_t dstStride = 0;
  bool reluEn = false;
  QuantMode_t quantPre = QuantMode_t::NoQuant;
  int64_t deqScalar = 0;
  uint16_t ndNum = 1, srcNdStride = 0, dstNdStride = 0;
  uint8_t unitFlag = 0;
};

template <typename T>
struct InitConstValueParams {
  InitConstValueParams() = default;
  InitConstValueParams(uint16_t repeatTimesIn, uint16_t blockNumIn, uint16_t dstGapIn, T initValueIn)
      : repeatTimes(repeatTimesIn), blockNum(blockNumIn), dstGap(dstGapIn), initValue(initValueIn) {}
  uint16_t repeatTimes = 0, blockNum = 0, dstGap = 0;
  T initValue{};
};

namespace shim {

constexpr uint32_t kFractal = 16;  // 16 x 16 fractal of 16-bit elements = 512 bytes

template <typename T>
void check_cube_operand(const LocalTensor<T>& t, Memory m, const char* op) {
  require_core(CoreType::AIC, op);
  if (memory_of(t.position()) != m) shim_fail(std::string(op) + ": operand must be in " + kMemoryName[static_cast<int>(m)]);
  if (t.byte_addr() % kBlockBytes != 0) shim_fail(std::string(op) + ": operand not 32-byte aligned");
}

inline void check_span(uint64_t end_elems, uint32_t size, const char* op) {
  if (end_elems > size) shim_fail(std::string(op) + ": writes or reads past the tensor");
}

}  // namespace shim

// GM -> L1 with ND -> NZ conversion; rows shorter than 32 bytes are zero-padded like the chip.
template <typename T>
void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const Nd2NzParams& p) {
  static_assert(sizeof(T) == 2, "the shim models ND2NZ for 16-bit types");
  shim::check_cube_operand(dst, shim::Memory::L1, "DataCopy ND2NZ");
  if (p.ndNum == 0 || p.nValue == 0 || p.dValue == 0) return;  // a NOP on the chip
  shim_check(p.nValue <= 16384 && p.ndNum <= 4095 && p.dstNzC0Stride >= 1 && p.dstNzNStride >= 1 && p.srcDValue >= 1,
             "DataCopy ND2NZ: parameter out of the documented range");
  shim_check(p.dValue <= p.srcDValue, "DataCopy ND2NZ: dValue exceeds the source row");
  const uint32_t c0 = shim::kBlockBytes / sizeof(T), d_pad = (p.dValue + c0 - 1) / c0 * c0;
  shim::note_access(dst.state(), PIPE_MTE2, true, "DataCopy ND2NZ");
  for (uint32_t m = 0; m < p.ndNum; ++m) {
    for (uint32_t r = 0; r < p.nValue; ++r) {
      const uint64_t s = uint64_t{m} * p.srcNdMatrixStride + uint64_t{r} * p.srcDValue;
      src.check(s, p.dValue);
      for (uint32_t d = 0; d < d_pad; ++d) {
        const uint64_t o = uint64_t{m} * p.dstNzMatrixStride + (uint64_t{d / c0} * p.dstNzC0Stride + uint64_t{r} * p.dstNzNStride) * c0 + d % c0;
        shim::check_span(o + 1, dst.GetSize(), "DataCopy ND2NZ");
        dst.data()[o] = d < p.dValue ? src.GetPhyAddr()[s + d] : T(0.0f);
      }
    }
  }
}

// Fills whole 32-byte blocks of L1 with a constant (MTE2 on Atlas A2, ordered with the copies).
template <typename T>
void InitConstValue(const LocalTensor<T>& dst, const InitConstValueParams<T>& p) {
  shim::check_cube_operand(dst, shim::Memory::L1, "InitConstValue");
  const uint32_t per_block = shim::kBlockBytes / sizeof(T);
  shim::note_access(dst.state(), PIPE_MTE2, true, "InitConstValue");
  for (uint32_t r = 0; r < p.repeatTimes; ++r) {
    const uint64_t first = uint64_t{r} * (p.blockNum + p.dstGap) * per_block;
    shim::check_span(first + uint64_t{p.blockNum} * per_block, dst.GetSize(), "InitConstValue");
    std::fill_n(dst.data() + first, uint64_t{p.blockNum} * per_block, p.initValue);
  }
}

// L1 -> L0A / L0B, one 512-byte fractal per repeat, optionally transposed (16-bit types).
template <typename T>
void LoadData(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LoadData2DParams& p) {
  static_assert(sizeof(T) == 2, "the shim models LoadData 2D for 16-bit types");
  shim::check_cube_operand(src, shim::Memory::L1, "LoadData");
  const auto dm = shim::memory_of(dst.position());
  if (dm != shim::Memory::L0A && dm != shim::Memory::L0B) shim_fail("LoadData: destination must be L0A or L0B");
  shim::check_cube_operand(dst, dm, "LoadData");
  shim_check(p.repeatTimes >= 1, "LoadData: repeatTimes must be 1..255");
  constexpr uint32_t f = shim::kFractal * shim::kFractal;
  shim::note_access(src.state(), PIPE_MTE1, false, "LoadData");
  shim::note_access(dst.state(), PIPE_MTE1, true, "LoadData");
  for (uint32_t i = 0; i < p.repeatTimes; ++i) {
    const uint64_t s = (uint64_t{p.startIndex} + uint64_t{i} * p.srcStride) * f, d = uint64_t{i} * (1 + p.dstGap) * f;
    shim::check_span(s + f, src.GetSize(), "LoadData (source)");
    shim::check_span(d + f, dst.GetSize(), "LoadData (destination)");
    for (uint32_t r = 0; r < shim::kFractal; ++r) {
      for (uint32_t c = 0; c < shim::kFractal; ++c) {
        const uint32_t from = p.ifTranspose ? c * shim::kFractal + r : r * shim::kFractal + c;
        dst.data()[d + r * shim::kFractal + c] = src.data()[s + from];
      }
    }
  }
}

// C[m, n] (=|+=) A[m, k] . B[k, n] with fp32 accumulation.
template <typename C, typename T>
void Mmad(const LocalTensor<C>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b, const MmadParams& p) {
  static_assert(sizeof(C) == 4 && sizeof(T) == 2, "the shim models fp16/bf16 inputs with fp32 accumulation");
  shim::check_cube_operand(dst, shim::Memory::L0C, "Mmad");
  shim::check_cube_operand(a, shim::Memory::L0A, "Mmad");
  shim::check_cube_operand(b, shim::Memory::L0B, "Mmad");
  shim_check(!p.cmatrixSource, "Mmad: bias from the C2 buffer is not modelled");
  constexpr uint32_t F = shim::kFractal;
  const uint32_t m1 = (p.m + F - 1) / F, k1 = (p.k + F - 1) / F, n1 = (p.n + F - 1) / F;
  shim::check_span(uint64_t{m1} * k1 * F * F, a.GetSize(), "Mmad (A)");
  shim::check_span(uint64_t{k1} * n1 * F * F, b.GetSize(), "Mmad (B)");
  shim::check_span(uint64_t{n1} * m1 * F * F, dst.GetSize(), "Mmad (C)");
  shim::note_access(a.state(), PIPE_M, false, "Mmad");
  shim::note_access(b.state(), PIPE_M, false, "Mmad");
  if (!p.cmatrixInitVal) shim::note_access(dst.state(), PIPE_M, false, "Mmad");  // accumulating reads C first
  shim::note_access(dst.state(), PIPE_M, true, "Mmad");
  // Unpack the fractals once (row-major A, column-major B), then plain fp32 dot products.
  std::vector<float> av(size_t{p.m} * p.k), bv(size_t{p.n} * p.k);
  for (uint32_t m = 0; m < p.m; ++m) {
    for (uint32_t k = 0; k < p.k; ++k) av[size_t{m} * p.k + k] = a.data()[((m / F) * k1 + k / F) * F * F + (m % F) * F + k % F];
  }
  for (uint32_t n = 0; n < p.n; ++n) {
    for (uint32_t k = 0; k < p.k; ++k) bv[size_t{n} * p.k + k] = b.data()[((k / F) * n1 + n / F) * F * F + (n % F) * F + k % F];
  }
  for (uint32_t m = 0; m < p.m; ++m) {
    for (uint32_t n = 0; n < p.n; ++n) {
      const float* x = &av[size_t{m} * p.k];
      const float* y = &bv[size_t{n} * p.k];
      float acc = 0.0f;
      for (uint32_t k = 0; k < p.k; ++k) acc += x[k] * y[k];
      float& c = dst.data()[((n / F) * m1 * F + m) * F + n % F];
      c = p.cmatrixInitVal ? acc : c + acc;
    }
  }
}

// L0C (NZ, fp32) -> GM (ND); srcStride counts the rows of one 16-column group of L0C.
template <typename D, typename C>
void Fixpipe(const GlobalTensor<D>& dst, const LocalTensor<C>& src, const FixpipeParamsV220& p) {
  shim::check_cube_operand(src, shim::Memory::L0C, "Fixpipe");
  shim_check(p.ndNum == 1, "Fixpipe: the shim models ndNum = 1");
  shim_check(p.srcStride >= p.mSize && p.srcStride % 16 == 0, "Fixpipe: srcStride must cover mSize in 16-row units");
  shim_check(!p.reluEn, "Fixpipe: ReLU is not modelled");
  const bool to_fp32 = p.quantPre == QuantMode_t::NoQuant;
  shim_check(to_fp32 == (sizeof(D) == 4), "Fixpipe: quantPre must match the destination type");
  shim::note_access(src.state(), PIPE_FIX, false, "Fixpipe");
  constexpr uint32_t F = shim::kFractal;
  for (uint32_t r = 0; r < p.mSize; ++r) {
    dst.check(uint64_t{r} * p.dstStride, p.nSize);
    for (uint32_t c = 0; c < p.nSize; ++c) {
      shim::check_span(((c / F) * p.srcStride + r) * F + c % F + 1, src.GetSize(), "Fixpipe");
      const float v = src.data()[((c / F) * p.srcStride + r) * F + c % F];
      dst.GetPhyAddr()[uint64_t{r} * p.dstStride + c] = D(v);
    }
  }
}

}  // namespace AscendC
