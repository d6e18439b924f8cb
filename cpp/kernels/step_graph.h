#pragma once
// Records a forward's kernel launches once and replays them as one launch (CUDA graphs), so that a
// small decode step is not bound by the host's launch rate. A device without graphs leaves
// KernelOps::capture_graph unset.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>

namespace mtpserve::kernels {

class StepGraph {
 public:
  virtual ~StepGraph() = default;
  // Copies `input` (its parts one after another, as many words as the graph's input buffer holds) into the
  // input buffer, then runs the recorded launches on the current stream, reading and writing the tensors
  // `body` used.
  virtual void replay(std::span<const std::span<const int64_t>> input) = 0;
};

// Runs `body` once (warming up lazy library state), then records it. `body` reads its step input from the
// device buffer `input` of `input_words` int64 words, which each replay fills. Tensors `body` creates live in
// the graph's memory pool and keep their addresses through every replay. With `share_pool_with`, the graph
// allocates from that graph's pool (capture the largest shapes first): one step runs at a time, so a replay
// may reuse another graph's intermediates.
using CaptureGraphFn = std::unique_ptr<StepGraph> (*)(const std::function<void()>& body,
                                                       StepGraph* share_pool_with, int64_t* input,
                                                       int64_t input_words);

}  // namespace mtpserve::kernels
