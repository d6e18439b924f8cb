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
// The draft fit and each k's offset forget old samples as the bucket's decode steps go by, not only
// as new samples come: a k = 0 step runs no draft phase at all where its fills are deferred, and
// measures nothing of another k's offset; a cost last measured long ago must give way to the next
// measurement (a probe's, a catch-up's) instead of outweighing it. The verify line forgets per sample
// only: every step measures it, and a step with drafts after many without must not wipe what those
// just measured. (It did: two steps at k = 1 were left alone in the line to set its context slope,
// and a batch of 64 on a CPU priced k = 0 at 41-43 ms where its last steps had taken 29-31.) A k
// that went unmeasured is repriced by its offset.
// A step's cost is far from linear over all batch sizes (one row more costs much more at batch 1
// than at batch 64 on a CPU; a GPU is flat until it is compute-bound), so each batch-size bucket
// (decoding sequences in [2^i, 2^(i+1))) has its own fits. Nor is it always linear across the k's of
// one batch size: a CPU GEMM can run 4 rows per sequence faster than 3 (verify at batch 1 measured
// 6.1 / 7.4 / 6.0 ms at k = 1 / 2 / 3), so each fit carries an offset per step k (per recursion count
// for the draft phase): the forgetting mean of what its steps took beyond the fit's line, aged like
// the fits. The marginal cost of one more draft (seconds_per_draft) stays the line's.
#include <cstdint>
#include <vector>

#include "engine/online_linear_fit.h"

namespace mtpserve {

class StepCostModel {
 public:
  static int64_t bucket(int64_t num_seqs);

  // Only decode / verify steps: prefill chunks cost differently per row and the policy never
  // predicts them.
  // step_k: the most drafts a sequence of the step verifies.
  void record_verify(int64_t num_seqs, int64_t step_k, int64_t rows, int64_t context, double seconds);
  void record_draft(int64_t num_seqs, int64_t fill_rows, int64_t recursions, int64_t recursion_rows, double seconds);

  double verify_seconds(int64_t num_seqs, int64_t step_k, double rows, double context) const;
  // 0 where nothing fills: the step runs no MTP forward.
  double draft_seconds(int64_t num_seqs, double fill_rows, double recursions, double recursion_rows) const;
  // Seconds a sequence's draft at `position` (1..k) adds to a step: its verify row, its token of context and,
  // past the first (which the fill drafts), its recursion row.
  double seconds_per_draft(int64_t num_seqs, int64_t position) const;

 private:
  // A signed mean with the fits' forgetting: a step's time beyond its fit's line.
  struct Offset {
    double sum = 0, weight = 0;
    int64_t steps_at_sample = 0;  // the bucket's `steps` at the last sample
    void add(double residual, double age);
    double mean() const { return weight > 0 ? sum / weight : 0.0; }
  };
  struct Fits {
    Fits();
    OnlineLinearFit verify, draft;
    std::vector<Offset> verify_offsets;  // per step k
    std::vector<Offset> draft_offsets;   // per recursion count
    int64_t steps = 0;                    // verify samples: the bucket's decode steps
    int64_t steps_at_draft = 0;           // `steps` when the draft fit last got a sample
  };
  Fits& fits(int64_t num_seqs);
  const Fits* find(int64_t num_seqs) const;
  // Adds a residual to offsets[key] (grown as needed), aged by the bucket steps since that key's last sample.
  static void add_offset(std::vector<Offset>& offsets, size_t key, int64_t steps, double residual);
  static double offset(const std::vector<Offset>& offsets, size_t key);

  std::vector<Fits> buckets_;
};

}  // namespace mtpserve
