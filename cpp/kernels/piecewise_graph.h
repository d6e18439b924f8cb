#pragma once
// Steps with prompt tokens as graphs. Their attention launches depend on the step's sequences (how many, how
// many rows each); everything else in the forward depends on the row count alone. Such a forward is recorded
// in pieces that end where it calls the device's attention: the pieces replay as graphs, and each attention
// call runs eagerly between them over the step's own metadata. One recording serves every step of its row
// count. A device without graphs leaves KernelOps::capture_piecewise unset.
#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>

#include "kernels/attention_metadata.h"
#include "kernels/step_graph.h"

namespace mtpserve::kernels {

class PiecewiseGraph {
 public:
  virtual ~PiecewiseGraph() = default;
  // Runs the pieces on the current stream and, between them, each recorded attention call over `meta`: the
  // step's, whose device tensors lie where the recorded forward read its own.
  virtual void replay(const AttentionMetadata& meta) = 0;
};

// Runs `body` once eagerly (warming up lazy library state), then records it in pieces from the memory pool of
// `share_pool_with`. Each attention call inside `body` copies its query into `queries` ([rows, heads, dim]) and
// is answered by `outputs` ([rows, heads, kv_lora_rank]), which the attention fills at replay: both are shared
// by every piecewise graph (one step runs at a time), each graph using their first rows.
using CapturePiecewiseFn = std::unique_ptr<PiecewiseGraph> (*)(const std::function<void()>& body,
                                                               StepGraph* share_pool_with, const at::Tensor& queries,
                                                               const at::Tensor& outputs);

}  // namespace mtpserve::kernels
