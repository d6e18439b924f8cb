#pragma once
// Where the engine's step durations come from. The default reads the host's steady clock: it
// times the work itself only where the timed span ends in a sync with the device, which holds on
// the CPU and for a span ending in a device-to-host copy (sampling ends in one). A device backend
// that launches asynchronously can pass a timer built on its own events instead.
#include <chrono>

namespace mtpserve {

class StepTimer {
 public:
  virtual ~StepTimer() = default;
  virtual void start() = 0;
  // Seconds from start() to now.
  virtual double seconds() = 0;
};

class SteadyStepTimer : public StepTimer {
 public:
  void start() override { start_ = std::chrono::steady_clock::now(); }
  double seconds() override {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace mtpserve
