#pragma once
// Global and local tensors, TPipe, TQue and TBuf. Every TPipe owns this core's physical buffers at
// the Atlas A2 (Ascend910B1) sizes; InitBuffer fails when the kernel asks for more than the chip has,
// and fresh buffers are filled with NaN bytes so that reading data never written shows up.
#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>
#include <string>

#include "shim_core.h"

namespace AscendC {

enum class TPosition { GM, A1, A2, B1, B2, C1, C2, CO1, CO2, VECIN, VECOUT, VECCALC, MAX };
using QuePosition = TPosition;

namespace shim {

enum class Memory { L1, L0A, L0B, L0C, UB, kCount };

// Capacities of one Ascend910B1 core (asc-tools cpudebug/src/api_check/inc/ascend910B1_ini.h:
// L1_SIZE, L0A_SIZE, L0B_SIZE, L0C_SIZE, UB_SIZE). AIC owns L1/L0*, AIV owns UB.
constexpr uint32_t kCapacity[] = {512 * 1024, 64 * 1024, 64 * 1024, 128 * 1024, 192 * 1024};
constexpr const char* kMemoryName[] = {"L1", "L0A", "L0B", "L0C", "UB"};
constexpr uint32_t kBlockBytes = 32;  // the 32-byte block every on-chip address is aligned to

inline Memory memory_of(TPosition p) {
  switch (p) {
    case TPosition::A1: case TPosition::B1: case TPosition::C1: return Memory::L1;
    case TPosition::A2: return Memory::L0A;
    case TPosition::B2: return Memory::L0B;
    case TPosition::CO1: return Memory::L0C;
    case TPosition::VECIN: case TPosition::VECOUT: case TPosition::VECCALC: return Memory::UB;
    default: shim_fail("position has no on-chip buffer in this shim");
  }
}

// The pipe a queue at this position hands its tensors to on DeQue (EnQue/DeQue is the flag).
inline int consumer_pipe(TPosition p) {
  switch (p) {
    case TPosition::VECIN: return PIPE_V;
    case TPosition::VECOUT: return PIPE_MTE3;
    case TPosition::A1: case TPosition::B1: return PIPE_MTE1;
    case TPosition::A2: case TPosition::B2: return PIPE_M;
    case TPosition::CO1: return PIPE_FIX;
    default: return -1;
  }
}

struct Slot {
  uint8_t* base = nullptr;
  uint32_t offset = 0, bytes = 0;  // offset inside its physical buffer
  TPosition pos = TPosition::GM;
  std::shared_ptr<BufferState> state = std::make_shared<BufferState>();
};

}  // namespace shim

template <typename T>
class LocalTensor {
 public:
  LocalTensor() = default;
  LocalTensor(const shim::Slot& s, uint32_t elem_offset, uint32_t count)
      : slot_(s), off_(elem_offset), count_(count) {}

  LocalTensor operator[](uint32_t offset) const {
    shim_check(offset <= count_, "LocalTensor[]: offset past the tensor");
    return LocalTensor(slot_, off_ + offset, count_ - offset);
  }
  uint32_t GetSize() const { return count_; }
  T GetValue(uint32_t i) const {
    shim_check(i < count_, "LocalTensor::GetValue out of range");
    shim::note_access(*slot_.state, PIPE_S, false, "GetValue");
    return data()[i];
  }
  void SetValue(uint32_t i, T v) const {
    shim_check(i < count_, "LocalTensor::SetValue out of range");
    shim::note_access(*slot_.state, PIPE_S, true, "SetValue");
    data()[i] = v;
  }

  // Shim-side accessors used by the instruction implementations.
  T* data() const { return reinterpret_cast<T*>(slot_.base + slot_.offset) + off_; }
  uint32_t byte_addr() const { return slot_.offset + off_ * sizeof(T); }
  TPosition position() const { return slot_.pos; }
  shim::BufferState& state() const { return *slot_.state; }
  const shim::Slot& slot() const { return slot_; }

 private:
  shim::Slot slot_;
  uint32_t off_ = 0, count_ = 0;
};

template <typename T>
class GlobalTensor {
 public:
  void SetGlobalBuffer(__gm__ T* buffer, uint64_t size = 0) {
    ptr_ = buffer;
    size_ = size;
  }
  GlobalTensor operator[](uint64_t offset) const {
    shim_check(size_ == 0 || offset <= size_, "GlobalTensor[]: offset past the buffer");
    GlobalTensor g;
    g.ptr_ = ptr_ + offset;
    g.size_ = size_ == 0 ? 0 : size_ - offset;
    return g;
  }
  T GetValue(uint64_t i) const {
    check(i, 1);
    return ptr_[i];
  }
  void SetValue(uint64_t i, T v) const {
    check(i, 1);
    ptr_[i] = v;
  }
  __gm__ T* GetPhyAddr() const { return ptr_; }
  uint64_t GetSize() const { return size_; }
  // Shim-side: a range [i, i + n) must lie inside the buffer when its size is known.
  void check(uint64_t i, uint64_t n) const {
    shim_check(ptr_ != nullptr, "GlobalTensor used before SetGlobalBuffer");
    shim_check(size_ == 0 || i + n <= size_, "GlobalTensor access past the buffer's size");
  }

 private:
  __gm__ T* ptr_ = nullptr;
  uint64_t size_ = 0;
};

template <TPosition Pos, int32_t Depth>
class TQue {
 public:
  template <typename T>
  LocalTensor<T> AllocTensor() {
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (!used_[i]) {
        used_[i] = true;
        // FreeTensor -> AllocTensor is itself a sync on the chip: the producer may overwrite.
        *slots_[i].state = shim::BufferState{};
        return LocalTensor<T>(slots_[i], 0, slots_[i].bytes / sizeof(T));
      }
    }
    shim_fail("TQue::AllocTensor: every buffer of the queue is in use (missing FreeTensor?)");
  }
  template <typename T>
  void FreeTensor(const LocalTensor<T>& t) { used_[index_of(t.slot())] = false; }
  template <typename T>
  bool EnQue(const LocalTensor<T>& t) {
    shim_check(fifo_.size() < slots_.size(), "TQue::EnQue: queue already full");
    fifo_.push_back(index_of(t.slot()));
    return true;
  }
  template <typename T>
  LocalTensor<T> DeQue() {
    if (fifo_.empty()) shim_fail("TQue::DeQue on an empty queue: on the chip the consumer pipe would hang");
    const auto& s = slots_[fifo_.front()];
    fifo_.pop_front();
    s.state->handed_to = shim::consumer_pipe(Pos);
    return LocalTensor<T>(s, 0, s.bytes / sizeof(T));
  }

  // Shim-side, for TPipe::InitBuffer.
  void add_slot(const shim::Slot& s) {
    slots_.push_back(s);
    used_.push_back(false);
  }

 private:
  size_t index_of(const shim::Slot& s) const {
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].offset == s.offset && slots_[i].base == s.base) return i;
    }
    shim_fail("tensor does not belong to this queue");
  }
  std::vector<shim::Slot> slots_;
  std::vector<bool> used_;
  std::deque<size_t> fifo_;
};

template <TPosition Pos>
class TBuf {
 public:
  template <typename T>
  LocalTensor<T> Get() const { return LocalTensor<T>(slot_, 0, slot_.bytes / sizeof(T)); }
  template <typename T>
  LocalTensor<T> Get(uint32_t count) const {
    shim_check(count * sizeof(T) <= slot_.bytes, "TBuf::Get: more elements than the buffer holds");
    return LocalTensor<T>(slot_, 0, count);
  }
  void set_slot(const shim::Slot& s) { slot_ = s; }

 private:
  shim::Slot slot_;
};

class TPipe {
 public:
  TPipe() {
    for (int m = 0; m < static_cast<int>(shim::Memory::kCount); ++m) {
      mem_[m].assign(shim::kCapacity[m], 0xFF);  // 0xFFFF.. is NaN in fp16/bf16/fp32
    }
  }
  template <TPosition Pos, int32_t Depth>
  void InitBuffer(TQue<Pos, Depth>& que, uint8_t num, uint32_t len) {
    for (uint8_t i = 0; i < num; ++i) que.add_slot(carve(Pos, len));
  }
  template <TPosition Pos>
  void InitBuffer(TBuf<Pos>& buf, uint32_t len) { buf.set_slot(carve(Pos, len)); }
  void Reset() { std::fill(std::begin(used_), std::end(used_), 0u); }

 private:
  shim::Slot carve(TPosition pos, uint32_t len) {
    const auto m = static_cast<int>(shim::memory_of(pos));
    const bool cube_memory = shim::memory_of(pos) != shim::Memory::UB;
    if (cube_memory != (shim::core().type == CoreType::AIC)) {
      shim_fail(std::string("TPipe::InitBuffer: ") + shim::kMemoryName[m] + " does not exist on this core type "
                "(Atlas A2 splits cube (L1/L0) and vector (UB) cores)");
    }
    const uint32_t bytes = (len + shim::kBlockBytes - 1) / shim::kBlockBytes * shim::kBlockBytes;
    if (used_[m] + bytes > shim::kCapacity[m]) {
      shim_fail(std::string("TPipe::InitBuffer: ") + shim::kMemoryName[m] + " overflow: " +
                std::to_string(used_[m] + bytes) + " bytes requested, the chip has " +
                std::to_string(shim::kCapacity[m]));
    }
    shim::Slot s;
    s.base = mem_[m].data();
    s.offset = used_[m];
    s.bytes = bytes;
    s.pos = pos;
    used_[m] += bytes;
    return s;
  }
  std::vector<uint8_t> mem_[static_cast<int>(shim::Memory::kCount)];
  uint32_t used_[static_cast<int>(shim::Memory::kCount)] = {};
};

}  // namespace AscendC
