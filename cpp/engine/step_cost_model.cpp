#include "engine/step_cost_model.h"


namespace mtpserve {

StepCostModel::Fits::Fits() : verify(2), draft(3) {}

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

void StepCostModel::record_verify(int64_t num_seqs, int64_t step_k, int64_t rows, int64_t context, double seconds) {
  Fits& f = fits(num_seqs);
  ++f.steps;
  f.verify.add(static_cast<size_t>(step_k), {static_cast<double>(rows), static_cast<double>(context)}, seconds, f.steps);
}

void StepCostModel::record_draft(int64_t num_seqs, int64_t fill_rows, int64_t recursions, int64_t recursion_rows,
                                 double seconds) {
  Fits& f = fits(num_seqs);
  f.draft.add(static_cast<size_t>(recursions),
              {static_cast<double>(fill_rows), static_cast<double>(recursions), static_cast<double>(recursion_rows)},
              seconds, f.steps);
}

double StepCostModel::verify_seconds(int64_t num_seqs, int64_t step_k, double rows, double context) const {
  const Fits* f = find(num_seqs);
  return f == nullptr ? 0.0 : f->verify.predict(static_cast<size_t>(step_k), {rows, context});
}

double StepCostModel::draft_seconds(int64_t num_seqs, double fill_rows, double recursions,
                                    double recursion_rows) const {
  const Fits* f = find(num_seqs);
  if (f == nullptr || fill_rows <= 0) return 0.0;
  return f->draft.predict(static_cast<size_t>(recursions), {fill_rows, recursions, recursion_rows});
}

double StepCostModel::seconds_per_draft(int64_t num_seqs, int64_t position) const {
  const Fits* f = find(num_seqs);
  if (f == nullptr) return 0.0;
  const double verify = f->verify.slope(0) + f->verify.slope(1);
  return position > 1 ? verify + f->draft.slope(2) : verify;
}

}  // namespace mtpserve
