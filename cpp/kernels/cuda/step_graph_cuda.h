#pragma once
#include <ATen/cuda/CUDAGraph.h>

#include "kernels/step_graph.h"

namespace mtpserve::kernels::cuda {

std::unique_ptr<StepGraph> capture_graph(const std::function<void()>& body, StepGraph* share_pool_with, int64_t* input,
                                         int64_t input_words);

// Runs `work` on a side stream, ordered after the work before it and before the work after it: capture needs a
// stream other than the default one.
void on_capture_stream(const std::function<void()>& work);

// The memory pool of a graph capture_graph() made; {0, 0} (a new pool) for null.
at::cuda::MempoolId_t graph_pool(StepGraph* graph);

}  // namespace mtpserve::kernels::cuda
