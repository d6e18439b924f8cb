#pragma once
// Vector-unit (AIV) instructions in their count form, and plain DataCopy between GM and UB. Each
// checks what the chip requires: AIV only, UB operands, 32-byte aligned starts, DataCopy lengths
// in whole 32-byte blocks, counts inside the tensors, and pipe ordering (note_access).
#include <cmath>
#include <limits>

#include "shim_memory.h"

namespace AscendC {

enum class RoundMode { CAST_NONE, CAST_RINT, CAST_FLOOR, CAST_CEIL, CAST_ROUND, CAST_TRUNC, CAST_ODD };

namespace shim {

template <typename T>
void check_ub(const LocalTensor<T>& t, uint32_t count, const char* op) {
  require_core(CoreType::AIV, op);
  if (memory_of(t.position()) != Memory::UB) shim_fail(std::string(op) + ": operand is not in UB");
  if (t.byte_addr() % kBlockBytes != 0) shim_fail(std::string(op) + ": UB operand not 32-byte aligned");
  if (count > t.GetSize()) shim_fail(std::string(op) + ": count exceeds the tensor");
}

template <typename T, typename F>
void unary(const LocalTensor<T>& dst, const LocalTensor<T>& src, int32_t count, const char* op, F f) {
  check_ub(dst, count, op);
  check_ub(src, count, op);
  note_access(src.state(), PIPE_V, false, op);
  note_access(dst.state(), PIPE_V, true, op);
  T* d = dst.data();
  const T* s = src.data();
  for (int32_t i = 0; i < count; ++i) d[i] = f(s[i]);
}

template <typename T, typename F>
void binary(const LocalTensor<T>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b, int32_t count,
            const char* op, F f) {
  check_ub(dst, count, op);
  check_ub(a, count, op);
  check_ub(b, count, op);
  note_access(a.state(), PIPE_V, false, op);
  note_access(b.state(), PIPE_V, false, op);
  note_access(dst.state(), PIPE_V, true, op);
  for (int32_t i = 0; i < count; ++i) dst.data()[i] = f(a.data()[i], b.data()[i]);
}

// Reductions need a work tensor of one partial per 256-byte repeat, rounded to a 32-byte block.
template <typename T>
void check_work(const LocalTensor<T>& work, int32_t count, const char* op) {
  const uint32_t per_repeat = 256 / sizeof(T), per_block = 32 / sizeof(T);
  const uint32_t need = ((count + per_repeat - 1) / per_repeat + per_block - 1) / per_block * per_block;
  check_ub(work, need, op);
}

}  // namespace shim

template <typename T>
void Exp(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t& count) {
  shim::unary(dst, src, count, "Exp", [](T x) { return static_cast<T>(std::exp(static_cast<float>(x))); });
}
template <typename T>
void Muls(const LocalTensor<T>& dst, const LocalTensor<T>& src, const T& scalar, const int32_t& count) {
  shim::unary(dst, src, count, "Muls", [&](T x) { return x * scalar; });
}
template <typename T>
void Adds(const LocalTensor<T>& dst, const LocalTensor<T>& src, const T& scalar, const int32_t& count) {
  shim::unary(dst, src, count, "Adds", [&](T x) { return x + scalar; });
}
template <typename T>
void Maxs(const LocalTensor<T>& dst, const LocalTensor<T>& src, const T& scalar, const int32_t& count) {
  shim::unary(dst, src, count, "Maxs", [&](T x) { return x > scalar ? x : scalar; });
}
template <typename T>
void Add(const LocalTensor<T>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b, const int32_t& count) {
  shim::binary(dst, a, b, count, "Add", [](T x, T y) { return x + y; });
}
template <typename T>
void Sub(const LocalTensor<T>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b, const int32_t& count) {
  shim::binary(dst, a, b, count, "Sub", [](T x, T y) { return x - y; });
}
template <typename T>
void Max(const LocalTensor<T>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b, const int32_t& count) {
  shim::binary(dst, a, b, count, "Max", [](T x, T y) { return x > y ? x : y; });
}
// dst = src * scalar + dst
template <typename T, typename U>
void Axpy(const LocalTensor<T>& dst, const LocalTensor<U>& src, const U& scalar, const int32_t& count) {
  shim::check_ub(dst, count, "Axpy");
  shim::check_ub(src, count, "Axpy");
  shim::note_access(src.state(), PIPE_V, false, "Axpy");
  shim::note_access(dst.state(), PIPE_V, true, "Axpy");
  for (int32_t i = 0; i < count; ++i) dst.data()[i] = dst.data()[i] + src.data()[i] * scalar;
}
template <typename T>
void Duplicate(const LocalTensor<T>& dst, const T& scalar, const int32_t& count) {
  shim::check_ub(dst, count, "Duplicate");
  shim::note_access(dst.state(), PIPE_V, true, "Duplicate");
  std::fill_n(dst.data(), count, scalar);
}
template <typename T>
void CreateVecIndex(const LocalTensor<T>& dst, const T& first, uint32_t count) {
  shim::check_ub(dst, count, "CreateVecIndex");
  shim::note_access(dst.state(), PIPE_V, true, "CreateVecIndex");
  for (uint32_t i = 0; i < count; ++i) dst.data()[i] = static_cast<T>(static_cast<float>(first) + i);
}

// Float to 16-bit float: only round-to-nearest-even (CAST_RINT) is modelled; the narrowing types'
// constructors round that way. Widening is exact and takes CAST_NONE.
template <typename D, typename S>
void Cast(const LocalTensor<D>& dst, const LocalTensor<S>& src, const RoundMode& mode, const uint32_t& count) {
  shim::check_ub(dst, count, "Cast");
  shim::check_ub(src, count, "Cast");
  const bool narrowing = sizeof(D) < sizeof(S);
  shim_check(narrowing ? mode == RoundMode::CAST_RINT : mode == RoundMode::CAST_NONE,
             "Cast: the shim models CAST_RINT for narrowing and CAST_NONE for widening only");
  shim::note_access(src.state(), PIPE_V, false, "Cast");
  shim::note_access(dst.state(), PIPE_V, true, "Cast");
  for (uint32_t i = 0; i < count; ++i) dst.data()[i] = D(static_cast<float>(src.data()[i]));
}

template <typename T>
void ReduceMax(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<T>& work, const int32_t count,
               bool calIndex = false) {
  shim_check(!calIndex, "ReduceMax: calIndex is not modelled by the shim");
  shim::check_work(work, count, "ReduceMax");
  shim::unary(dst, src, 1, "ReduceMax", [](T x) { return x; });  // checks + ordering of dst/src
  shim::check_ub(src, count, "ReduceMax");
  T m = src.data()[0];
  for (int32_t i = 1; i < count; ++i) m = src.data()[i] > m ? src.data()[i] : m;
  dst.data()[0] = m;
}
template <typename T>
void ReduceSum(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<T>& work, const int32_t count) {
  shim::check_work(work, count, "ReduceSum");
  shim::unary(dst, src, 1, "ReduceSum", [](T x) { return x; });
  shim::check_ub(src, count, "ReduceSum");
  float s = 0.0f;  // the chip sums a tree of repeats; fp32 sum order differs in the last bits only
  for (int32_t i = 0; i < count; ++i) s += static_cast<float>(src.data()[i]);
  dst.data()[0] = static_cast<T>(s);
}

// GM -> UB (MTE2) and UB -> GM (MTE3): whole 32-byte blocks only; DataCopyPad would lift that rule.
template <typename T>
void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const uint32_t count) {
  shim::require_core(CoreType::AIV, "DataCopy GM->UB");
  shim::check_ub(dst, count, "DataCopy GM->UB");
  if (count * sizeof(T) % shim::kBlockBytes != 0) shim_fail("DataCopy GM->UB: length is not a multiple of 32 bytes");
  src.check(0, count);
  shim::note_access(dst.state(), PIPE_MTE2, true, "DataCopy GM->UB");
  std::memcpy(dst.data(), src.GetPhyAddr(), count * sizeof(T));
}
template <typename T>
void DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const uint32_t count) {
  shim::require_core(CoreType::AIV, "DataCopy UB->GM");
  shim::check_ub(src, count, "DataCopy UB->GM");
  if (count * sizeof(T) % shim::kBlockBytes != 0) shim_fail("DataCopy UB->GM: length is not a multiple of 32 bytes");
  dst.check(0, count);
  shim::note_access(src.state(), PIPE_MTE3, false, "DataCopy UB->GM");
  std::memcpy(dst.GetPhyAddr(), src.data(), count * sizeof(T));
}

}  // namespace AscendC
