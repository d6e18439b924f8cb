#include "kernels/cuda/step_graph_cuda.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>

namespace mtpserve::kernels::cuda {

namespace {

// The step input goes from a pinned staging buffer of the graph's own, by one cudaMemcpyAsync: a pinned
// allocation and a tensor copy_ per replay cost some 6 us more host time (on an H100's host), on the step's
// critical path.
class CudaStepGraph final : public StepGraph {
 public:
  CudaStepGraph(int64_t* input, int64_t input_words)
      : input_(input),
        words_(input_words),
        staging_(at::empty({input_words}, at::TensorOptions(at::kLong).pinned_memory(true))) {}

  void replay(std::span<const std::span<const int64_t>> input) override {
    copied_.synchronize();  // the last replay's copy has left the staging buffer (a step's sync saw to it)
    int64_t* dst = staging_.data_ptr<int64_t>();
    int64_t words = 0;
    for (const auto part : input) {
      words += static_cast<int64_t>(part.size());
      if (words > words_) break;
      dst = std::ranges::copy(part, dst).out;
    }
    if (words != words_) {
      throw std::invalid_argument("step graph replay: the input has " + std::to_string(words) +
                                  " words where the graph was captured with " + std::to_string(words_));
    }
    const auto stream = c10::cuda::getCurrentCUDAStream();
    C10_CUDA_CHECK(cudaMemcpyAsync(input_, staging_.data_ptr(), words_ * sizeof(int64_t), cudaMemcpyHostToDevice,
                                   stream));
    copied_.record(stream);
    graph_.replay();
  }
  at::cuda::CUDAGraph& graph() { return graph_; }
  at::cuda::MempoolId_t pool() { return graph_.pool(); }

 private:
  int64_t* input_;
  int64_t words_;
  at::Tensor staging_;
  c10::cuda::CUDAEvent copied_;
  at::cuda::CUDAGraph graph_;
};

// One capture stream per device for the whole process. The caching allocator reuses a freed block only on the stream
// that allocated it, so graphs that share a pool share its memory only when they are captured on one stream; a stream
// from torch's pool per capture left each of those 32 streams its own blocks (and its own cuBLAS workspace).
c10::cuda::CUDAStream capture_stream() {
  static std::mutex mutex;
  static std::unordered_map<c10::DeviceIndex, c10::cuda::CUDAStream> streams;
  const std::lock_guard lock(mutex);
  const c10::DeviceIndex device = c10::cuda::current_device();
  auto stream = streams.find(device);
  if (stream == streams.end()) {
    cudaStream_t raw = nullptr;
    C10_CUDA_CHECK(cudaStreamCreateWithFlags(&raw, cudaStreamNonBlocking));  // kept for the process's lifetime
    stream = streams.emplace(device, c10::cuda::getStreamFromExternal(raw, device)).first;
  }
  return stream->second;
}

}  // namespace

at::cuda::MempoolId_t graph_pool(StepGraph* graph) {
  return graph ? static_cast<CudaStepGraph*>(graph)->pool() : at::cuda::MempoolId_t{0, 0};
}

void on_capture_stream(const std::function<void()>& work) {
  auto caller = c10::cuda::getCurrentCUDAStream();
  auto side = capture_stream();
  c10::cuda::CUDAEvent ready;
  ready.record(caller);
  ready.block(side);
  {
    c10::cuda::CUDAStreamGuard guard(side);
    work();
  }
  c10::cuda::CUDAEvent done;
  done.record(side);
  done.block(caller);
}

std::unique_ptr<StepGraph> capture_graph(const std::function<void()>& body, StepGraph* share_pool_with, int64_t* input,
                                         int64_t input_words) {
  const auto pool = graph_pool(share_pool_with);
  auto graph = std::make_unique<CudaStepGraph>(input, input_words);
  on_capture_stream([&] {
    body();
    // Thread-local: under tensor parallelism NCCL's watchdog thread queries its events meanwhile.
    graph->graph().capture_begin(pool, cudaStreamCaptureModeThreadLocal);
    body();
    graph->graph().capture_end();
  });
  return graph;
}

}  // namespace mtpserve::kernels::cuda
