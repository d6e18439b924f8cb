#include "engine/step_cost_model.h"

namespace mtpserve {

namespace {

// Each sample's weight halves after about 70 steps: long enough to average step-time noise,
// short enough to follow a load that changes.
constexpr double kForget = 0.99;

}  // namespace

StepCostModel::StepCostModel() : verify_(3, kForget), draft_(4, kForget) {}

void StepCostModel::record_verify(int64_t rows, int64_t attention, double seconds) {
  verify_.add({1.0, static_cast<double>(rows), static_cast<double>(attention)}, seconds);
}

void StepCostModel::record_draft(int64_t fill_rows, int64_t recursions, int64_t recursion_rows, double seconds) {
  draft_.add({1.0, static_cast<double>(fill_rows), static_cast<double>(recursions),
              static_cast<double>(recursion_rows)},
             seconds);
}

double StepCostModel::verify_seconds(double rows, double attention) const {
  return verify_.predict({1.0, rows, attention});
}

double StepCostModel::draft_seconds(double fill_rows, double recursions, double recursion_rows) const {
  return draft_.predict({1.0, fill_rows, recursions, recursion_rows});
}

double StepCostModel::seconds_per_draft(double context) const {
  return verify_.coefficients()[1] + verify_.coefficients()[2] * context + draft_.coefficients()[3];
}

}  // namespace mtpserve
