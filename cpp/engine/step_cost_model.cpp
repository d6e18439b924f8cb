#include "engine/step_cost_model.h"

#include <algorithm>
#include <cmath>

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

void StepCostModel::Offset::add(double residual, double age) {
  const double forget = std::pow(kForget, age);
  sum = forget * sum + residual;
  weight = forget * weight + 1.0;
}

void StepCostModel::add_offset(std::vector<Offset>& offsets, size_t key, int64_t steps, double residual) {
  if (offsets.size() <= key) offsets.resize(key + 1);
  Offset& o = offsets[key];
  o.add(residual, age_after(steps - o.steps_at_sample));
  o.steps_at_sample = steps;
}

double StepCostModel::offset(const std::vector<Offset>& offsets, size_t key) {
  return key < offsets.size() ? offsets[key].mean() : 0.0;
}

void StepCostModel::record_verify(int64_t num_seqs, int64_t step_k, int64_t rows, int64_t context, double seconds) {
  Fits& f = fits(num_seqs);
  ++f.steps;
  const std::vector<double> x{1.0, static_cast<double>(rows), static_cast<double>(context)};
  f.verify.add(x, seconds);
  add_offset(f.verify_offsets, static_cast<size_t>(step_k), f.steps, seconds - f.verify.predict(x));
}

void StepCostModel::record_draft(int64_t num_seqs, int64_t fill_rows, int64_t recursions, int64_t recursion_rows,
                                 double seconds) {
  Fits& f = fits(num_seqs);
  const std::vector<double> x{1.0, static_cast<double>(fill_rows), static_cast<double>(recursions),
                              static_cast<double>(recursion_rows)};
  f.draft.add(x, seconds, age_after(f.steps - f.steps_at_draft));
  f.steps_at_draft = f.steps;
  add_offset(f.draft_offsets, static_cast<size_t>(recursions), f.steps, seconds - f.draft.predict(x));
}

double StepCostModel::verify_seconds(int64_t num_seqs, int64_t step_k, double rows, double context) const {
  const Fits* f = find(num_seqs);
  if (f == nullptr) return 0.0;
  return std::max(0.0, f->verify.predict({1.0, rows, context}) + offset(f->verify_offsets, static_cast<size_t>(step_k)));
}

double StepCostModel::draft_seconds(int64_t num_seqs, double fill_rows, double recursions,
                                    double recursion_rows) const {
  const Fits* f = find(num_seqs);
  if (f == nullptr || fill_rows <= 0) return 0.0;
  return std::max(0.0, f->draft.predict({1.0, fill_rows, recursions, recursion_rows}) +
                           offset(f->draft_offsets, static_cast<size_t>(recursions)));
}

double StepCostModel::seconds_per_draft(int64_t num_seqs, int64_t position) const {
  const Fits* f = find(num_seqs);
  if (f == nullptr) return 0.0;
  const double verify = f->verify.coefficients()[1] + f->verify.coefficients()[2];
  return position > 1 ? verify + f->draft.coefficients()[3] : verify;
}

}  // namespace mtpserve
