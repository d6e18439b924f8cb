#pragma once
// The captured graphs of decode-shaped forwards, keyed by their padded shape: the target step
// (decode or MTP verify), the MTP drafting (the fill and every recursive draft forward in one
// graph), and the recursive draft forwards alone (after a fill that ran eagerly), one per batch
// bucket. A replay copies the forwards' packed inputs into the graph's static input buffer (one
// copy) and returns the graph's outputs. Those live in the shared pool, which later
// captures may reuse: they are valid until the next replay of any graph (a step reads them first).
#include <ATen/core/Tensor.h>

#include <compare>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "engine/step_input.h"
#include "kernels/step_graph.h"

namespace mtpserve {

struct GraphKey {
  int64_t seqs = 0, query_len = 0;
  // -1: a target step; else the MTP fill (query_len rows per sequence; 0: none) and this many draft forwards
  int64_t draft_forwards = -1;
  auto operator<=>(const GraphKey&) const = default;
};

class StepGraphs {
 public:
  using Body = std::function<std::vector<at::Tensor>(const std::vector<DeviceStep>&)>;

  StepGraphs(kernels::CaptureGraphFn capture, const at::Device& device) : capture_(capture), device_(device) {}

  // Records `body` over `inputs` (placeholders of the key's shape) as the graph of `key`.
  void capture(GraphKey key, const std::vector<StepInput>& inputs, const Body& body);
  bool has(GraphKey key) const { return graphs_.contains(key); }
  // Copies `inputs` (of the key's shape) into the graph's input buffer and replays it.
  const std::vector<at::Tensor>& replay(GraphKey key, std::span<const StepInput> inputs);
  size_t size() const { return graphs_.size(); }
  // A graph whose memory pool later captures share (null before the first).
  kernels::StepGraph* pool_owner() const { return graphs_.empty() ? nullptr : graphs_.begin()->second.graph.get(); }

 private:
  struct Captured {
    std::unique_ptr<kernels::StepGraph> graph;
    at::Tensor inputs;
    std::vector<at::Tensor> outputs;
  };

  kernels::CaptureGraphFn capture_;
  at::Device device_;
  std::map<GraphKey, Captured> graphs_;
};

}  // namespace mtpserve
