#pragma once
#include <functional>

#include "kernels/piecewise_graph.h"

namespace mtpserve::kernels::cuda {

std::unique_ptr<PiecewiseGraph> capture_piecewise(const std::function<void()>& body, StepGraph* share_pool_with,
                                                  const at::Tensor& queries, const at::Tensor& outputs);

// The attention of a forward being recorded in pieces: `run` gives the attention of a query over some metadata.
using AttentionRun = std::function<at::Tensor(const at::Tensor& q, const AttentionMetadata& meta)>;
// Whether this thread is recording a forward in pieces (the attention ops then call record_attention).
bool recording_pieces();
// Ends the current piece after copying `q` into the shared queries, keeps `run` for the replays, starts the next
// piece and returns the shared outputs that the replays' attention fills.
at::Tensor record_attention(const at::Tensor& q, AttentionRun run);

}  // namespace mtpserve::kernels::cuda
