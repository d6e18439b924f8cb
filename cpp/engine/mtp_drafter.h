#pragma once
// Drafts with the model's MTP layer. MTP pair i = (token i+1, target hidden state i) lives in the
// MTP cache at the target's cache position i (same block tables) and is rotated at position
// i + 1; its output predicts token i + 2. After each target step the pairs of every newly
// computed position are run (filling the MTP cache) and the last one gives draft 1; drafts
// 2..k recurse on the layer's own output, writing positions that later steps overwrite.
// Drafts stay on the device through the recursion and come back to the host in one copy.
// A request may bring positions whose fill was deferred (HiddenStash): the fill runs them first, as
// the rows of one sequence before this step's own, reading their hidden states from the stash.
#include <vector>

#include "core/sequence.h"
#include "engine/hidden_stash.h"
#include "engine/model_runner.h"

namespace mtpserve {

struct DraftRequest {
  Sequence* seq;
  int64_t first_pair;  // first target position computed this step
  int64_t num_pairs;   // positions computed this step (their hidden states are at hidden_row...)
  int64_t hidden_row;
  int64_t num_drafts;  // drafts wanted; 0 only fills the MTP cache
  StashedPositions stashed = {};  // positions first_pair - stashed.count .. first_pair - 1, to catch up
};

// The MTP forwards of one drafting as the host builds them: the fill, then the recursive draft forwards.
struct DraftForwards {
  std::vector<StepInput> forwards;
  bool catch_up = false;  // the fill runs stashed positions first
};

class MtpDrafter {
 public:
  MtpDrafter(ModelRunner& runner, int64_t block_size) : runner_(runner), block_size_(block_size) {}

  // Sets each request's seq->draft_tokens (tokens up to first_pair + num_pairs must be known).
  void propose(const std::vector<DraftRequest>& requests) const { run(requests, forwards(requests)); }
  // propose() in two halves, so that the engine can tell the host's part of drafting from the device's: the
  // forwards built on the host (none for no requests), then their run and the drafts' copy back.
  DraftForwards forwards(const std::vector<DraftRequest>& requests) const;
  void run(const std::vector<DraftRequest>& requests, DraftForwards drafting) const;

 private:
  ModelRunner& runner_;
  int64_t block_size_;
};

}  // namespace mtpserve
