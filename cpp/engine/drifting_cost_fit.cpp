#include "engine/drifting_cost_fit.h"

#include <algorithm>
#include <stdexcept>

namespace mtpserve {

namespace {

// Variances in units of the first sample's cost, squared.
// A step's time scatters by about 14% around its expectation (a 2-core CPU's; a GPU's scatters less, and the
// filter then trusts each step a little less than it could).
constexpr double kNoise = 0.02;
// The drift's variance per decode step, relative to the costs: they may move by some 5.5% from one step to the
// next, so that the estimate follows a device that slows by 20% within some ten steps of the key that runs.
constexpr double kDrift = 0.003;
// An offset starts at the line with a spread of 30% and may change slowly on its own (over some 45 of its own
// samples where its key runs every step), as a step k's cost relative to the others can (its context grows,
// another kernel is chosen); a key that runs alone does not absorb the drift into its own offset.
constexpr double kOffsetPrior = 0.09;
constexpr double kOffsetDrift = 1e-5;
// The level and slopes start unknown.
constexpr double kDiffuse = 1e4;
// Samples off their predictions by more than the noise says, on average over the last ten or so (normalised
// squared innovations above this), mean the costs changed shape, not only scale (the model's kernels, a
// co-tenant that takes one kind of work): the fit then grows as unsure as they are off, and learns anew.
constexpr double kSurpriseLevel = 4.0;
constexpr double kSurpriseMemory = 0.9;
constexpr double kSurpriseCap = 100.0;  // one sample's share: a stall alone is no change of shape
// The relative noise is taken of at least this expected cost: the first sample's, whose expectation is 0.
constexpr double kNoiseFloor = 1e-3;

}  // namespace

DriftingCostFit::DriftingCostFit(size_t num_slopes) : num_slopes_(num_slopes), state_(1 + num_slopes, 0.0) {
  const size_t n = state_.size();
  cov_.assign(n * n, 0.0);
  for (size_t i = 0; i < n; ++i) cov_[i * n + i] = kDiffuse;
}

void DriftingCostFit::grow_to(size_t key) {
  const size_t old_n = state_.size(), n = std::max(old_n, offset_index(key) + 1);
  if (n == old_n) return;
  std::vector<double> cov(n * n, 0.0);
  for (size_t i = 0; i < old_n; ++i) std::copy_n(cov_.begin() + i * old_n, old_n, cov.begin() + i * n);
  for (size_t i = old_n; i < n; ++i) cov[i * n + i] = kOffsetPrior;  // a new offset starts at the line
  cov_ = std::move(cov);
  state_.resize(n, 0.0);
}

std::vector<double> DriftingCostFit::observation(size_t key, const std::vector<double>& x) const {
  if (x.size() != num_slopes_) throw std::invalid_argument("DriftingCostFit: wrong number of features");
  std::vector<double> h(state_.size(), 0.0);
  h[0] = 1.0;
  for (size_t i = 0; i < num_slopes_; ++i) h[1 + i] = x[i] / x_unit_[i];
  if (offset_index(key) < h.size()) h[offset_index(key)] = 1.0;
  return h;
}

void DriftingCostFit::drift(int64_t steps) {
  const size_t n = state_.size();
  const double gap = static_cast<double>(std::max<int64_t>(steps, 0));
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      cov_[i * n + j] += gap * kDrift * state_[i] * state_[j];
    }
  }
  for (size_t i = offset_index(0); i < n; ++i) cov_[i * n + i] += gap * kOffsetDrift;
}

void DriftingCostFit::add(size_t key, const std::vector<double>& x, double y, int64_t time) {
  if (y_unit_ == 0) {
    if (!(y > 0)) return;  // nothing to scale by yet
    y_unit_ = y;
    for (double v : x) x_unit_.push_back(v > 0 ? v : 1.0);
    time_ = time;
  }
  grow_to(key);
  drift(time - time_);
  time_ = std::max(time_, time);
  const size_t n = state_.size();
  const std::vector<double> h = observation(key, x);
  std::vector<double> ph(n, 0.0);  // cov h
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) ph[i] += cov_[i * n + j] * h[j];
  }
  double expected = 0, spread = 0;
  for (size_t i = 0; i < n; ++i) {
    expected += h[i] * state_[i];
    spread += h[i] * ph[i];
  }
  const double noise = kNoise * std::max(expected * expected, kNoiseFloor * kNoiseFloor);
  const double innovation = y / y_unit_ - expected, total = spread + noise;
  surprise_ = kSurpriseMemory * surprise_ +
              (1 - kSurpriseMemory) * std::min(innovation * innovation / total, kSurpriseCap);
  for (size_t i = 0; i < n; ++i) state_[i] += ph[i] / total * innovation;
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i; j < n; ++j) {
      const double v = cov_[i * n + j] - ph[i] * ph[j] / total;
      cov_[i * n + j] = cov_[j * n + i] = v;
    }
  }
  if (surprise_ > kSurpriseLevel) {
    for (double& v : cov_) v *= surprise_ / kSurpriseLevel;
  }
}

double DriftingCostFit::predict(size_t key, const std::vector<double>& x) const {
  if (y_unit_ == 0) return 0.0;
  const std::vector<double> h = observation(key, x);
  double y = 0;
  for (size_t i = 0; i < state_.size(); ++i) y += h[i] * state_[i];
  return std::max(0.0, y * y_unit_);
}

double DriftingCostFit::slope(size_t i) const {
  if (y_unit_ == 0) return 0.0;
  return std::max(0.0, state_[1 + i] * y_unit_ / x_unit_[i]);
}

}  // namespace mtpserve
