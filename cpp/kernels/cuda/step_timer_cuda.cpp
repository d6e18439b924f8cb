#include "kernels/cuda/step_timer_cuda.h"

#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAStream.h>

namespace mtpserve::kernels::cuda {

namespace {

class CudaStepTimer final : public StepTimer {
 public:
  CudaStepTimer() : start_(cudaEventDefault), stop_(cudaEventDefault) {}  // timing events
  void start() override { start_.record(c10::cuda::getCurrentCUDAStream()); }
  void stop() override { stop_.record(c10::cuda::getCurrentCUDAStream()); }
  double seconds() override {
    stop_.synchronize();
    return start_.elapsed_time(stop_) / 1e3;
  }

 private:
  c10::cuda::CUDAEvent start_, stop_;
};

}  // namespace

std::unique_ptr<StepTimer> make_step_timer() { return std::make_unique<CudaStepTimer>(); }

}  // namespace mtpserve::kernels::cuda
