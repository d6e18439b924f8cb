#include "engine/step_cost_model.h"

#include <algorithm>

namespace mtpserve {

namespace {

// Each sample's weight halves after about 70 decode steps of its bucket: long enough to average
// step-time noise, short enough to follow a device whose speed drifts.
constexpr double kForget = 0.99;
// A decode step that does not measure what a fit would need ages it this many times as fast: a
// cost that has gone unmeasured for a probe interval keeps a trace of its weight only, so the next
// measurement (a probe's, a catch-up's) sets the estimate instead of nudging it.
constexpr double kUnmeasuredAging = 10.0;

// The age of a fit's older samples when a new one comes `steps` decode steps after the last one
// that measured the same thing.
double age_after(int64_t steps) { return 1.0 + kUnmeasuredAging * static_cast<double>(std::max<int64_t>(0, steps - 1)); }

}  // namespace

StepCostModel::Fits::Fits() : verify(3, kForget), draft(4, kForget) {}

int64_t StepCostModel::bucket(int64_t num_seqs) {
  int64_t b = 0;
  while (num_seqs > 1) {
    num_seqs >>= 1;
    ++b;
  }
  return b;
}

StepCostModel::Fits& StepCostModel::fits(int64_t num_seqs) {
  const auto b = static_cast<size_t>(bucket(num_seqs));
  if (buckets_.size() <= b) buckets_.resize(b + 1);
  return buckets_[b];
}

const StepCostModel::Fits* StepCostModel::find(int64_t num_seqs) const {
  const auto b = static_cast<size_t>(bucket(num_seqs));
  return b < buckets_.size() ? &buckets_[b] : nullptr;
}

void StepCostModel::record_verify(int64_t num_seqs, int64_t rows, int64_t context, double seconds) {
  Fits& f = fits(num_seqs);
  ++f.steps;
  // Only a step with drafts (more rows than sequences) measures what a verify row costs.
  const bool drafted = rows > num_seqs;
  f.verify.add({1.0, static_cast<double>(rows), static_cast<double>(context)}, seconds,
               drafted ? age_after(f.steps - f.steps_at_drafted_verify) : 1.0);
  if (drafted) f.steps_at_drafted_verify = f.steps;
}

void StepCostModel::record_draft(int64_t num_seqs, int64_t fill_rows, int64_t recursions, int64_t recursion_rows,
                                 double seconds) {
  Fits& f = fits(num_seqs);
  f.draft.add({1.0, static_cast<double>(fill_rows), static_cast<double>(recursions),
               static_cast<double>(recursion_rows)},
              seconds, age_after(f.steps - f.steps_at_draft));
  f.steps_at_draft = f.steps;
}

double StepCostModel::verify_seconds(int64_t num_seqs, double rows, double context) const {
  const Fits* f = find(num_seqs);
  return f ? f->verify.predict({1.0, rows, context}) : 0.0;
}

double StepCostModel::draft_seconds(int64_t num_seqs, double fill_rows, double recursions, double recursion_rows,
                                    double fixed_share) const {
  const Fits* f = find(num_seqs);
  return f ? f->draft.predict({fixed_share, fill_rows, recursions, recursion_rows}) : 0.0;
}

double StepCostModel::seconds_per_draft(int64_t num_seqs) const {
  const Fits* f = find(num_seqs);
  if (f == nullptr) return 0.0;
  return f->verify.coefficients()[1] + f->verify.coefficients()[2] + f->draft.coefficients()[3];
}

}  // namespace mtpserve
