#pragma once
// Launching a kernel on the CPU. Atlas A2 pairs one cube core (AIC) with two vector cores (AIV);
// a mixed 1:2 kernel launched on blockDim cores runs here as blockDim groups of three threads
// (AIC, AIV0, AIV1) that meet only through GM and CrossCoreSetFlag / CrossCoreWaitFlag. Groups run
// one after another (the chip runs them at once; kernels must not depend on either order).
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "shim_core.h"

namespace AscendC {
namespace shim {

constexpr int kCrossCoreFlags = 16;
constexpr int kFlagMax = 15;  // the chip's per-flag counter saturates at 15 pending sets

struct CoreGroup {
  std::mutex mu;
  std::condition_variable cv;
  int aic[kCrossCoreFlags] = {};           // sets that the AIC may consume
  int aiv[2][kCrossCoreFlags] = {};        // sets that each AIV may consume
  int aiv_sets[kCrossCoreFlags][2] = {};   // AIV sets not yet paired into one AIC-visible set
  bool failed = false;
};

struct LaunchMode {
  KernelMetaType type = KERNEL_TYPE_AIV_ONLY;
};
inline LaunchMode& launch_mode() {
  static LaunchMode m;
  return m;
}
inline void check_kernel_type(KernelMetaType t) {
  if (t != launch_mode().type) shim_fail("KERNEL_TASK_TYPE_DEFAULT differs from the way the kernel was launched");
}

inline void wait_for(CoreGroup& g, std::unique_lock<std::mutex>& lock, int& counter, uint16_t flag) {
  const bool ok = g.cv.wait_for(lock, std::chrono::seconds(30), [&] { return counter > 0 || g.failed; });
  if (g.failed) shim_fail("another core of this group failed");
  if (!ok) shim_fail("CrossCoreWaitFlag(" + std::to_string(flag) + "): no matching set within 30 s (a hang on the chip)");
  --counter;
}

}  // namespace shim

// Mode 2 only (AIC <-> both AIVs of its core): an AIC set releases one wait on each AIV; the AIC's
// wait is released once both AIVs have set.
template <uint8_t modeId, pipe_t pipe>
void CrossCoreSetFlag(uint16_t flagId) {
  static_assert(modeId == 2, "the shim models CrossCoreSetFlag mode 2 (AIC <-> its two AIVs)");
  static_assert(pipe != PIPE_S && pipe != PIPE_ALL, "CrossCoreSetFlag takes a data pipe");
  auto& c = shim::core();
  shim_check(flagId < shim::kCrossCoreFlags, "CrossCoreSetFlag: flag id must be 0..15");
  auto& g = *c.group;
  std::lock_guard<std::mutex> lock(g.mu);
  if (c.type == CoreType::AIC) {
    for (auto& v : g.aiv) {
      shim_check(++v[flagId] <= shim::kFlagMax, "CrossCoreSetFlag: counter overflow (more than 15 unconsumed sets)");
    }
  } else {
    ++g.aiv_sets[flagId][c.sub_block_idx];
    if (g.aiv_sets[flagId][0] > 0 && g.aiv_sets[flagId][1] > 0) {
      --g.aiv_sets[flagId][0];
      --g.aiv_sets[flagId][1];
      shim_check(++g.aic[flagId] <= shim::kFlagMax, "CrossCoreSetFlag: counter overflow (more than 15 unconsumed sets)");
    }
  }
  g.cv.notify_all();
}

inline void CrossCoreWaitFlag(uint16_t flagId) {
  auto& c = shim::core();
  shim_check(flagId < shim::kCrossCoreFlags, "CrossCoreWaitFlag: flag id must be 0..15");
  auto& g = *c.group;
  std::unique_lock<std::mutex> lock(g.mu);
  shim::wait_for(g, lock, c.type == CoreType::AIC ? g.aic[flagId] : g.aiv[c.sub_block_idx][flagId], flagId);
}

namespace shim {

inline void reset_core(CoreType type, int64_t idx, int64_t num, int64_t sub, int64_t ration, CoreGroup* g) {
  auto& c = core();
  c = CoreState{};
  c.type = type;
  c.block_idx = idx;
  c.block_num = num;
  c.sub_block_idx = sub;
  c.task_ration = ration;
  c.group = g;
}

// Every SetFlag must have been waited for by the end of the kernel: a dangling one means the
// kernel's pipe ordering is not what its author thought.
inline void check_core_finished() {
  for (const auto& per_event : core().pending_flags) {
    for (const auto& ids : per_event) {
      if (!ids.empty()) shim_fail("kernel ended with a SetFlag that no WaitFlag consumed");
    }
  }
}

// Runs `body` on one core; the first failure of a group is kept and its peers are released.
inline void run_core(CoreGroup& g, std::exception_ptr& err, std::mutex& err_mu, const std::function<void()>& body,
                     CoreType type, int64_t idx, int64_t num, int64_t sub, int64_t ration) {
  try {
    reset_core(type, idx, num, sub, ration, &g);
    body();
    check_core_finished();
  } catch (...) {
    std::lock_guard<std::mutex> lock(err_mu);
    if (!err) err = std::current_exception();
    std::lock_guard<std::mutex> glock(g.mu);
    g.failed = true;
    g.cv.notify_all();
  }
}

}  // namespace shim

// blockDim AI cores, each an AIC + 2 AIVs running `body` (a mixed 1:2 kernel).
inline void LaunchMixAic1To2(uint32_t blockDim, const std::function<void()>& body) {
  shim::launch_mode().type = KERNEL_TYPE_MIX_AIC_1_2;
  std::exception_ptr err;
  std::mutex err_mu;
  for (uint32_t b = 0; b < blockDim && !err; ++b) {
    shim::CoreGroup g;
    std::thread v0(shim::run_core, std::ref(g), std::ref(err), std::ref(err_mu), std::cref(body), CoreType::AIV,
                   2 * b, blockDim, 0, 2);
    std::thread v1(shim::run_core, std::ref(g), std::ref(err), std::ref(err_mu), std::cref(body), CoreType::AIV,
                   2 * b + 1, blockDim, 1, 2);
    shim::run_core(g, err, err_mu, body, CoreType::AIC, b, blockDim, 0, 1);
    v0.join();
    v1.join();
  }
  if (err) std::rethrow_exception(err);
}

// blockDim vector cores running `body` (an AIV-only kernel), one after another.
inline void LaunchAivOnly(uint32_t blockDim, const std::function<void()>& body) {
  shim::launch_mode().type = KERNEL_TYPE_AIV_ONLY;
  std::exception_ptr err;
  std::mutex err_mu;
  for (uint32_t b = 0; b < blockDim && !err; ++b) {
    shim::CoreGroup g;
    shim::run_core(g, err, err_mu, body, CoreType::AIV, b, blockDim, 0, 1);
  }
  if (err) std::rethrow_exception(err);
}

}  // namespace AscendC
