#pragma once
// Step plans from rank 0's engine to the tensor-parallel workers: every forward rank 0 runs
// (target step, MTP fill, each MTP recursion) is announced as one int64 message on the group's
// control channel (one broadcast of a fixed-size frame: the kind, the payload's length and its start;
// a second one for the rest of a long payload), so that every rank runs the same forward and its
// collectives line up. A graph replay or a graph capture is announced alike.
#include <cstdint>
#include <span>
#include <vector>

#include "dist/tensor_parallel.h"

namespace mtpserve {

enum class StepKind : int64_t {
  kShutdown = 0,
  kTarget = 1,    // payload: StepInput::wire
  kMtpFill = 2,   // payload: StepInput::wire; its source rows index the last target hidden states
  kMtpDraft = 3,  // payload: StepInput::wire; its source rows index the last MTP outputs
  // payload: StepInput::wire; a fill whose negative source rows read the hidden-state stash (single
  // rank only: the engine defers no fill under tensor parallelism)
  kMtpCatchUp = 4,
  // payload: a GraphPlan (ModelRunner): capture the graphs rank 0 captures, in its order, so that the
  // collectives of their warm-up runs and captures line up
  kCaptureGraphs = 5,
  // payload: a GraphKey, then each forward's wire (its length first): replay that captured graph
  kReplayGraph = 6,
};

struct StepMessage {
  StepKind kind = StepKind::kShutdown;
  std::vector<int64_t> wire;
};

// Rank 0: announces one forward.
void send_step(const TensorParallel& tp, StepKind kind, std::span<const int64_t> wire = {});
// Ranks 1..N-1: waits for rank 0's next message.
StepMessage receive_step(const TensorParallel& tp);

}  // namespace mtpserve
