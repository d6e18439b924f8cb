#pragma once
// A cost learned online as   y = level + slopes . x + offset[key],   where the device's drift scales every
// term alike: a Kalman filter whose state random-walks along its own direction (a co-tenant, a clock or a
// power cap makes every kind of step slower by the same factor), while the offsets between keys (step k's
// cost beyond the line) rest on every sample of each key, not only on its latest.
// So a key that runs alone for a long time leaves the others priced as measured, scaled by the drift it
// observed, and a key measured rarely (a probe) keeps the mean of its probes instead of the last one's noise.
// Where the samples stay further off than the noise allows, the costs changed shape, not scale, and the fit
// grows unsure enough to learn the new shape within tens of steps.
// (A line refit with forgetting did neither: after a batch of one's warm-up on a CPU, thirty steps of k = 2
// alone tilted its context slope and priced k = 3 at k = 2's cost, 23% above its own; and a key probed once
// in 150 steps was priced by that one step, 10-20% off on a CPU.)
// Costs and features are kept in units of the first sample's, so the noise and drift below are relative.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mtpserve {

class DriftingCostFit {
 public:
  explicit DriftingCostFit(size_t num_slopes);

  // `time`: the caller's clock (decode steps), along which the drift accumulates.
  void add(size_t key, const std::vector<double>& x, double y, int64_t time);
  // 0 before the first sample; a key never sampled is priced by the line.
  double predict(size_t key, const std::vector<double>& x) const;
  // What one more unit of feature i costs (never below 0: each feature is work).
  double slope(size_t i) const;

 private:
  size_t offset_index(size_t key) const { return 1 + num_slopes_ + key; }
  void grow_to(size_t key);
  // The observation vector: level, scaled features, the key's offset.
  std::vector<double> observation(size_t key, const std::vector<double>& x) const;
  // The uncertainty that `steps` decode steps without a sample add.
  void drift(int64_t steps);

  size_t num_slopes_;
  double y_unit_ = 0;  // 0 until the first sample
  std::vector<double> x_unit_;
  std::vector<double> state_;  // level, slopes, offsets by key
  std::vector<double> cov_;    // state_.size() squared, row-major
  int64_t time_ = 0;
  double surprise_ = 0;  // recent samples' squared innovations over their variance: 1 when the fit is right
};

}  // namespace mtpserve
