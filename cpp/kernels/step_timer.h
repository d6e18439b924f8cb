#pragma once
// Device time of a stretch of a step's launches, for the engine's cost figures: CUDA events on a GPU
// (so a graph replay counts its execution, not its launch), the host clock on the CPU, where
// launches run as they are issued. seconds() is read after the step has synchronised anyway.
#include <chrono>
#include <memory>

namespace mtpserve::kernels {

class StepTimer {
 public:
  virtual ~StepTimer() = default;
  virtual void start() = 0;
  virtual void stop() = 0;
  // The time between the last start() and stop(); waits for stop() to be reached on the device.
  virtual double seconds() = 0;
};

class HostStepTimer final : public StepTimer {
 public:
  void start() override { start_ = std::chrono::steady_clock::now(); }
  void stop() override { stop_ = std::chrono::steady_clock::now(); }
  double seconds() override { return std::chrono::duration<double>(stop_ - start_).count(); }

 private:
  std::chrono::steady_clock::time_point start_, stop_;
};

// Unset in a device's table: the host clock measures it.
using MakeStepTimerFn = std::unique_ptr<StepTimer> (*)();

}  // namespace mtpserve::kernels
