#include "kernels/cuda/step_graph_cuda.h"

#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

namespace mtpserve::kernels::cuda {

namespace {

class CudaStepGraph final : public StepGraph {
 public:
  void replay() override { graph_.replay(); }
  at::cuda::CUDAGraph& graph() { return graph_; }
  at::cuda::MempoolId_t pool() { return graph_.pool(); }

 private:
  at::cuda::CUDAGraph graph_;
};

}  // namespace

std::unique_ptr<StepGraph> capture_graph(const std::function<void()>& body, StepGraph* share_pool_with) {
  // {0, 0}: a new private pool.
  const auto pool = share_pool_with ? static_cast<CudaStepGraph*>(share_pool_with)->pool()
                                    : at::cuda::MempoolId_t{0, 0};
  // Capture needs a stream other than the default one; it is ordered after the work before it
  // and before the work after it.
  auto caller = c10::cuda::getCurrentCUDAStream();
  auto side = c10::cuda::getStreamFromPool();
  c10::cuda::CUDAEvent ready;
  ready.record(caller);
  ready.block(side);
  auto graph = std::make_unique<CudaStepGraph>();
  {
    c10::cuda::CUDAStreamGuard guard(side);
    body();
    graph->graph().capture_begin(pool);
    body();
    graph->graph().capture_end();
  }
  c10::cuda::CUDAEvent done;
  done.record(side);
  done.block(caller);
  return graph;
}

}  // namespace mtpserve::kernels::cuda
