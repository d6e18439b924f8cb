#include "engine/online_linear_fit.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

namespace mtpserve {

namespace {

// Relative ridge on the diagonal: keeps the solve defined while a feature has barely varied
// (a steady batch), without a scale of its own.
constexpr double kRidge = 1e-6;

}  // namespace

OnlineLinearFit::OnlineLinearFit(size_t num_features, double forget)
    : n_(num_features), forget_(forget), xtx_(n_ * n_, 0.0), xty_(n_, 0.0), coef_(n_, 0.0) {
  if (n_ == 0 || !(forget > 0 && forget <= 1)) throw std::invalid_argument("OnlineLinearFit: bad arguments");
}

void OnlineLinearFit::add(const std::vector<double>& x, double y, double age) {
  if (x.size() != n_) throw std::invalid_argument("OnlineLinearFit::add: wrong number of features");
  if (!(age >= 0)) throw std::invalid_argument("OnlineLinearFit::add: age must be >= 0");
  const double forget = std::pow(forget_, age);
  for (size_t i = 0; i < n_; ++i) {
    xty_[i] = forget * xty_[i] + x[i] * y;
    for (size_t j = 0; j < n_; ++j) xtx_[i * n_ + j] = forget * xtx_[i * n_ + j] + x[i] * x[j];
  }
  solve();
}

double OnlineLinearFit::predict(const std::vector<double>& x) const {
  double y = 0;
  for (size_t i = 0; i < n_; ++i) y += coef_[i] * x[i];
  return y;
}

void OnlineLinearFit::solve() {
  // Active set: drop the most negative coefficient and solve again, at most once per feature.
  std::vector<bool> active(n_);
  for (size_t i = 0; i < n_; ++i) active[i] = xtx_[i * n_ + i] > 0;
  std::vector<double> coef;
  for (size_t round = 0; round < n_; ++round) {
    if (!solve_active(active, coef)) return;  // keep the last good coefficients
    size_t worst = n_;
    for (size_t i = 0; i < n_; ++i) {
      if (active[i] && coef[i] < 0 && (worst == n_ || coef[i] < coef[worst])) worst = i;
    }
    if (worst == n_) break;
    active[worst] = false;
  }
  for (double& c : coef) c = std::max(c, 0.0);
  coef_ = std::move(coef);
}

bool OnlineLinearFit::solve_active(const std::vector<bool>& active, std::vector<double>& coef) const {
  std::vector<size_t> idx;
  for (size_t i = 0; i < n_; ++i) {
    if (active[i]) idx.push_back(i);
  }
  const size_t m = idx.size();
  // Gaussian elimination with partial pivoting on [A | b], m <= a handful.
  std::vector<double> a(m * (m + 1));
  for (size_t r = 0; r < m; ++r) {
    for (size_t c = 0; c < m; ++c) a[r * (m + 1) + c] = xtx_[idx[r] * n_ + idx[c]];
    a[r * (m + 1) + r] *= 1 + kRidge;
    a[r * (m + 1) + m] = xty_[idx[r]];
  }
  for (size_t col = 0; col < m; ++col) {
    size_t pivot = col;
    for (size_t r = col + 1; r < m; ++r) {
      if (std::abs(a[r * (m + 1) + col]) > std::abs(a[pivot * (m + 1) + col])) pivot = r;
    }
    if (a[pivot * (m + 1) + col] == 0) return false;
    for (size_t c = 0; c <= m; ++c) std::swap(a[col * (m + 1) + c], a[pivot * (m + 1) + c]);
    for (size_t r = 0; r < m; ++r) {
      if (r == col) continue;
      const double f = a[r * (m + 1) + col] / a[col * (m + 1) + col];
      for (size_t c = col; c <= m; ++c) a[r * (m + 1) + c] -= f * a[col * (m + 1) + c];
    }
  }
  coef.assign(n_, 0.0);
  for (size_t r = 0; r < m; ++r) coef[idx[r]] = a[r * (m + 1) + m] / a[r * (m + 1) + r];
  return true;
}

}  // namespace mtpserve
