#pragma once
// Least squares of y on a few non-negative features with exponential forgetting: a new sample
// weighs 1 and every older one `forget` times what it weighed before, so the fit follows a device
// whose speed drifts (clocks, co-tenants) without a window to size. Coefficients are kept
// non-negative: every term is a cost, and a noisy negative slope would make more work look free.
#include <cstddef>
#include <vector>

namespace mtpserve {

class OnlineLinearFit {
 public:
  OnlineLinearFit(size_t num_features, double forget);

  void add(const std::vector<double>& x, double y);
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
