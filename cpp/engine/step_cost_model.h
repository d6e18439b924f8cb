#pragma once
// What a step costs on this device, learned online from the engine's own timings (no constants
// measured on one machine):
//   verify  t = a + b * rows + c * attention        rows: tokens fed to the target; attention:
//                                                   sum over sequences of rows x context length
//   draft   t = d + e * fill_rows + f * recursions + g * recursion_rows
// `verify` spans the target forward and sampling; `draft` the MTP fill and the recursion for
// drafts 2..k (one forward per recursion level, recursion_rows rows in all).
#include <cstdint>

#include "engine/online_linear_fit.h"

namespace mtpserve {

class StepCostModel {
 public:
  StepCostModel();

  // Only decode / verify steps: prefill chunks cost differently per row and the policy never
  // predicts them.
  void record_verify(int64_t rows, int64_t attention, double seconds);
  void record_draft(int64_t fill_rows, int64_t recursions, int64_t recursion_rows, double seconds);

  double verify_seconds(double rows, double attention) const;
  double draft_seconds(double fill_rows, double recursions, double recursion_rows) const;
  // Seconds one more draft adds to a step: its verify row (attending over `context` tokens) and
  // its recursion row.
  double seconds_per_draft(double context) const;

 private:
  OnlineLinearFit verify_, draft_;
};

}  // namespace mtpserve
