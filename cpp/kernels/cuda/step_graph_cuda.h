#pragma once
#include "kernels/step_graph.h"

namespace mtpserve::kernels::cuda {

std::unique_ptr<StepGraph> capture_graph(const std::function<void()>& body, StepGraph* share_pool_with, int64_t* input,
                                         int64_t input_words);

}  // namespace mtpserve::kernels::cuda
