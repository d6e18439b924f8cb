#pragma once
// One AI core's identity and pipe-ordering state on the CPU. On the chip every pipe (MTE2, MTE1,
// M, FIX, V, MTE3, S) runs asynchronously and the kernel orders them with queues and flags; the
// shim executes each instruction at once, so instead of modelling the asynchrony it CHECKS that
// the kernel ordered every read-after-write across pipes (see BufferState / note_access).
#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

// Qualifiers and argument type of a kernel source; empty on the CPU.
#define __global__
#define __aicore__
#define __gm__
#define __inline__ inline
using GM_ADDR = uint8_t*;

enum pipe_t : int { PIPE_S = 0, PIPE_V, PIPE_M, PIPE_MTE1, PIPE_MTE2, PIPE_MTE3, PIPE_FIX, PIPE_ALL, kPipeCount = PIPE_ALL };
enum event_t : int { EVENT_ID0 = 0, EVENT_ID1, EVENT_ID2, EVENT_ID3, EVENT_ID4, EVENT_ID5, EVENT_ID6, EVENT_ID7 };

namespace AscendC {

// A rule of the chip that the kernel broke (capacity, alignment, ordering, range): on the NPU it
// would be silent corruption or a hang, so the shim stops the kernel.
struct ShimError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
[[noreturn]] inline void shim_fail(const std::string& what) { throw ShimError(what); }
inline void shim_check(bool ok, const char* what) {
  if (!ok) shim_fail(what);
}

enum class CoreType { AIC, AIV };

// Producer/consumer pipe of each hardware event, as HardEvent::SRC_DST names them.
enum class HardEvent : int {
  MTE2_MTE1, MTE1_MTE2, MTE1_M, M_MTE1, MTE2_V, V_MTE2, MTE3_V, V_MTE3, M_FIX, FIX_M, MTE2_S, S_MTE2, V_S, S_V,
  MTE3_S, S_MTE3, MTE3_MTE2, MTE2_MTE3, FIX_MTE2, MTE2_FIX, kCount
};

namespace shim {

constexpr std::array<std::pair<pipe_t, pipe_t>, static_cast<int>(HardEvent::kCount)> kEventPipes{{
    {PIPE_MTE2, PIPE_MTE1}, {PIPE_MTE1, PIPE_MTE2}, {PIPE_MTE1, PIPE_M}, {PIPE_M, PIPE_MTE1}, {PIPE_MTE2, PIPE_V},
    {PIPE_V, PIPE_MTE2}, {PIPE_MTE3, PIPE_V}, {PIPE_V, PIPE_MTE3}, {PIPE_M, PIPE_FIX}, {PIPE_FIX, PIPE_M},
    {PIPE_MTE2, PIPE_S}, {PIPE_S, PIPE_MTE2}, {PIPE_V, PIPE_S}, {PIPE_S, PIPE_V}, {PIPE_MTE3, PIPE_S},
    {PIPE_S, PIPE_MTE3}, {PIPE_MTE3, PIPE_MTE2}, {PIPE_MTE2, PIPE_MTE3}, {PIPE_FIX, PIPE_MTE2}, {PIPE_MTE2, PIPE_FIX},
}};

inline const char* pipe_name(int p) {
  static const char* names[] = {"S", "V", "M", "MTE1", "MTE2", "MTE3", "FIX", "ALL"};
  return names[p];
}

struct CoreGroup;  // one AI core's AIC and its two AIVs (shim_launch.h)

// Last write into one on-chip buffer: which pipe, when, and which pipe a queue handed it to.
struct BufferState {
  int writer = -1;
  uint64_t epoch = 0;
  int handed_to = -1;
};

struct CoreState {
  CoreType type = CoreType::AIV;
  int64_t block_idx = 0, block_num = 1, sub_block_idx = 0, task_ration = 1;
  CoreGroup* group = nullptr;
  uint64_t epoch = 0;
  // visible[p][q]: writes of pipe p up to this epoch are ordered before pipe q's next instruction.
  std::array<std::array<uint64_t, kPipeCount>, kPipeCount> visible{};
  std::array<std::array<std::vector<uint64_t>, 8>, static_cast<int>(HardEvent::kCount)> pending_flags{};
};

inline CoreState& core() {
  thread_local CoreState state;
  return state;
}

// Enforces read-after-write ordering across pipes: pipe `pipe` touching `buf` must see its last
// writer's result through a flag, a queue hand-over or a barrier. Same-pipe order is in-order.
inline void note_access(BufferState& buf, int pipe, bool writes, const char* op) {
  auto& c = core();
  if (buf.writer >= 0 && buf.writer != pipe && buf.handed_to != pipe && c.visible[buf.writer][pipe] < buf.epoch) {
    shim_fail(std::string(op) + ": pipe " + pipe_name(pipe) + " uses a buffer written by pipe " +
              pipe_name(buf.writer) + " with no flag/queue between them (a race on the chip)");
  }
  if (writes) {
    buf.writer = pipe;
    buf.epoch = ++c.epoch;
    buf.handed_to = -1;
  }
}

inline void require_core(CoreType t, const char* op) {
  if (core().type != t) {
    shim_fail(std::string(op) + (t == CoreType::AIC ? " runs on the cube core (AIC) only" : " runs on a vector core (AIV) only"));
  }
}

}  // namespace shim

template <HardEvent E>
inline void SetFlag(int32_t id) {
  auto& c = shim::core();
  shim_check(id >= 0 && id < 8, "SetFlag: event id out of range 0..7");
  c.pending_flags[static_cast<int>(E)][id].push_back(c.epoch);
}

template <HardEvent E>
inline void WaitFlag(int32_t id) {
  auto& c = shim::core();
  shim_check(id >= 0 && id < 8, "WaitFlag: event id out of range 0..7");
  auto& q = c.pending_flags[static_cast<int>(E)][id];
  if (q.empty()) shim_fail("WaitFlag without a matching SetFlag: on the chip this pipe would wait forever");
  const auto [src, dst] = shim::kEventPipes[static_cast<int>(E)];
  c.visible[src][dst] = std::max(c.visible[src][dst], q.front());
  q.erase(q.begin());
}

template <pipe_t P>
inline void PipeBarrier() {
  auto& c = shim::core();
  if constexpr (P == PIPE_ALL) {
    for (auto& row : c.visible) row.fill(c.epoch);
  } else {
    c.visible[P][P] = c.epoch;
  }
}

inline int64_t GetBlockIdx() { return shim::core().block_idx; }
inline int64_t GetBlockNum() { return shim::core().block_num; }
inline int64_t GetSubBlockIdx() { return shim::core().sub_block_idx; }
inline int64_t GetTaskRation() { return shim::core().task_ration; }

}  // namespace AscendC

// A mixed kernel compiles once per core type on the chip; on the CPU the same body runs on both
// kinds of threads and these test the thread's kind.
#define ASCEND_IS_AIC (::AscendC::shim::core().type == ::AscendC::CoreType::AIC)
#define ASCEND_IS_AIV (::AscendC::shim::core().type == ::AscendC::CoreType::AIV)

// Kernel type declaration of CANN 8.x; the shim checks it against how the kernel was launched.
enum KernelMetaType { KERNEL_TYPE_AIV_ONLY, KERNEL_TYPE_AIC_ONLY, KERNEL_TYPE_MIX_AIC_1_1, KERNEL_TYPE_MIX_AIC_1_2 };
namespace AscendC::shim {
inline void check_kernel_type(KernelMetaType t);  // shim_launch.h
}
#define KERNEL_TASK_TYPE_DEFAULT(t) ::AscendC::shim::check_kernel_type(t)
