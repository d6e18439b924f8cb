#pragma once
// What a step costs on this device, learned online from the engine's own timings (no constants
// measured on one machine):
//   verify  t = a + b * rows + c * context          rows: tokens fed to the target; context: the
//                                                   context lengths summed over the sequences (the
//                                                   latent cache a step reads: once per sequence,
//                                                   however many verify rows it has)
//   draft   t = d + e * fill_rows + f * recursions + g * recursion_rows
// `verify` spans the target forward and sampling; `draft` the MTP fill and the recursion for
// drafts 2..k (one forward per recursion level, recursion_rows rows in all).
// Both fits forget old samples as the bucket's decode steps go by, not only as new samples come: a
// k = 0 step measures no verify row's cost, and runs no draft phase at all where its fills are
// deferred; a cost last measured long ago must give way to the next measurement (a probe's, a
// catch-up's) instead of outweighing it.
// A step's cost is far from linear over all batch sizes (one row more costs much more at batch 1
// than at batch 64 on a CPU; a GPU is flat until it is compute-bound), so each batch-size bucket
// (decoding sequences in [2^i, 2^(i+1))) has its own fits: linear is only asked to hold across
// the k's of one batch size.
#include <cstdint>
#include <vector>

#include "engine/online_linear_fit.h"

namespace mtpserve {

class StepCostModel {
 public:
  static int64_t bucket(int64_t num_seqs);

  // Only decode / verify steps: prefill chunks cost differently per row and the policy never
  // predicts them.
  void record_verify(int64_t num_seqs, int64_t rows, int64_t context, double seconds);
  void record_draft(int64_t num_seqs, int64_t fill_rows, int64_t recursions, int64_t recursion_rows, double seconds);

  double verify_seconds(int64_t num_seqs, double rows, double context) const;
  // fixed_share: the part of the draft phase's fixed cost d this step pays (a deferred fill's is shared).
  double draft_seconds(int64_t num_seqs, double fill_rows, double recursions, double recursion_rows,
                       double fixed_share = 1.0) const;
  // Seconds one more draft adds to a step: its verify row, its token of context and its
  // recursion row.
  double seconds_per_draft(int64_t num_seqs) const;

 private:
  struct Fits {
    Fits();
    OnlineLinearFit verify, draft;
    int64_t steps = 0;                    // verify samples: the bucket's decode steps
    int64_t steps_at_draft = 0;           // `steps` when the draft fit last got a sample
    int64_t steps_at_drafted_verify = 0;  // `steps` at the last verify sample with drafts
  };
  Fits& fits(int64_t num_seqs);
  const Fits* find(int64_t num_seqs) const;

  std::vector<Fits> buckets_;
};

}  // namespace mtpserve
