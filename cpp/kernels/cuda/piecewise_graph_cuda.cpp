#include "kernels/cuda/piecewise_graph_cuda.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAGraph.h>

#include <stdexcept>
#include <vector>

#include "kernels/cuda/step_graph_cuda.h"

namespace mtpserve::kernels::cuda {

namespace {

class CudaPiecewiseGraph final : public PiecewiseGraph {
 public:
  CudaPiecewiseGraph(const at::Tensor& queries, const at::Tensor& outputs, at::cuda::MempoolId_t pool)
      : queries_(queries), outputs_(outputs), pool_(pool) {}

  void replay(const AttentionMetadata& meta) override {
    for (size_t i = 0; i < pieces_.size(); ++i) {
      pieces_[i]->replay();
      if (i < attention_.size()) answers_[i].copy_(attention_[i](questions_[i], meta));
    }
  }

  void begin_piece() {
    pieces_.push_back(std::make_unique<at::cuda::CUDAGraph>());
    pieces_.back()->capture_begin(pool_, cudaStreamCaptureModeThreadLocal);
  }

  void end_piece() {
    pieces_.back()->capture_end();
    pool_ = pieces_.back()->pool();  // the later pieces allocate from the first one's pool (known once it ends)
  }

  at::Tensor record(const at::Tensor& q, AttentionRun run) {
    auto question = queries_.narrow(0, 0, q.size(0));
    auto answer = outputs_.narrow(0, 0, q.size(0));
    if (question.sizes() != q.sizes() || question.scalar_type() != q.scalar_type() ||
        answer.size(1) != q.size(1) || answer.scalar_type() != q.scalar_type()) {
      throw std::invalid_argument("piecewise graph: the attention's query does not fit the shared buffers");
    }
    question.copy_(q);
    end_piece();
    attention_.push_back(std::move(run));
    questions_.push_back(question);
    answers_.push_back(answer);
    begin_piece();
    return answer;
  }

 private:
  at::Tensor queries_, outputs_;
  at::cuda::MempoolId_t pool_;
  std::vector<std::unique_ptr<at::cuda::CUDAGraph>> pieces_;
  std::vector<AttentionRun> attention_;
  std::vector<at::Tensor> questions_, answers_;  // per attention call: its query and output rows
};

thread_local CudaPiecewiseGraph* recording = nullptr;

}  // namespace

bool recording_pieces() { return recording != nullptr; }

at::Tensor record_attention(const at::Tensor& q, AttentionRun run) { return recording->record(q, std::move(run)); }

std::unique_ptr<PiecewiseGraph> capture_piecewise(const std::function<void()>& body, StepGraph* share_pool_with,
                                                  const at::Tensor& queries, const at::Tensor& outputs) {
  auto graph = std::make_unique<CudaPiecewiseGraph>(queries, outputs, graph_pool(share_pool_with));
  on_capture_stream([&] {
    body();
    recording = graph.get();
    try {
      graph->begin_piece();
      body();
      graph->end_piece();
    } catch (...) {
      recording = nullptr;
      throw;
    }
    recording = nullptr;
  });
  return graph;
}

}  // namespace mtpserve::kernels::cuda
