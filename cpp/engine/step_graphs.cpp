#include "engine/step_graphs.h"

#include <ATen/ATen.h>

namespace mtpserve {

void StepGraphs::capture(GraphKey key, const std::vector<StepInput>& inputs, const Body& body) {
  Captured captured;
  captured.inputs = upload(inputs, device_);
  // The int32 metadata is converted from the input buffer inside the graph, on every replay.
  captured.graph = capture_([&] { captured.outputs = body(device_steps(captured.inputs, inputs)); }, pool_owner(),
                            captured.inputs.data_ptr<int64_t>(), captured.inputs.numel());
  // Views that do not own their memory: the pool may hand it to the next capture, so outputs cost no
  // memory beyond the largest graph's working set.
  for (auto& out : captured.outputs) out = at::from_blob(out.data_ptr(), out.sizes(), out.strides(), out.options());
  graphs_[key] = std::move(captured);
}

const std::vector<at::Tensor>& StepGraphs::replay(GraphKey key, std::span<const StepInput> inputs) {
  Captured& captured = graphs_.at(key);
  std::vector<std::span<const int64_t>> parts;
  for (const auto& input : inputs) parts.push_back(input.packed());
  captured.graph->replay(parts);
  return captured.outputs;
}

}  // namespace mtpserve
