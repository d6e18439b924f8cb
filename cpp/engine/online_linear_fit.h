#pragma once
// Least squares of y on a few non-negative features with exponential forgetting: a new sample
// weighs 1 and every older one forget^age times what it weighed before (age: forgetting periods
// since the previous sample, one by default), so the fit follows a device whose speed drifts (clocks,
// co-tenants) without a window to size, and a sample taken after a long gap outweighs stale ones.
// Coefficients are kept non-negative: every term is a cost, and a noisy negative slope would make more
// work look free.
#include <cstddef>
#include <vector>

namespace mtpserve {

class OnlineLinearFit {
 public:
  OnlineLinearFit(size_t num_features, double forget);

  void add(const std::vector<double>& x, double y, double age = 1.0);
  // 0 before the first sample.
  double predict(const std::vector<double>& x) const;
  const std::vector<double>& coefficients() const { return coef_; }

 private:
  void solve();
  // Solves the normal equations restricted to the features with active[i]; false if singular.
  bool solve_active(const std::vector<bool>& active, std::vector<double>& coef) const;

  size_t n_;
  double forget_;
  std::vector<double> xtx_, xty_, coef_;
};

}  // namespace mtpserve
