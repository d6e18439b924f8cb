#include "model/rotary_embedding.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <numbers>

namespace mtpserve {

namespace {

double yarn_mscale(double factor, double mscale) {
  return factor <= 1.0 ? 1.0 : 0.1 * mscale * std::log(factor) + 1.0;
}

double correction_dim(double rotations, int64_t dim, double base, double max_positions) {
  return dim * std::log(max_positions / (rotations * 2 * std::numbers::pi)) / (2 * std::log(base));
}

// YaRN frequencies: interpolated below the low-rotation bound, extrapolated above the high one,
// linearly blended between (the dims bounds are rounded outwards).
at::Tensor yarn_inv_freq(const at::Tensor& base_freqs, const RopeScaling& s, int64_t dim, double base) {
  double low = std::floor(correction_dim(s.beta_fast, dim, base, s.original_max_position_embeddings));
  double high = std::ceil(correction_dim(s.beta_slow, dim, base, s.original_max_position_embeddings));
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;
  auto ramp = at::clamp((at::arange(dim / 2, at::kFloat) - low) / (high - low), 0, 1);
  auto extrapolation = 1 - ramp;
  auto inv_extrapolation = 1.0 / base_freqs;
  auto inv_interpolation = 1.0 / (s.factor * base_freqs);
  return inv_interpolation * (1 - extrapolation) + inv_extrapolation * extrapolation;
}

}  // namespace

RotaryEmbedding::RotaryEmbedding(const ModelConfig& config)
    : batch_invariant_(config.batch_invariant), ops_(&kernels::ops_for(at::Device(at::kCPU), config.batch_invariant)) {
  const int64_t dim = config.qk_rope_head_dim;
  auto base_freqs = at::pow(config.rope_theta, at::arange(0, dim, 2, at::kFloat) / dim);
  at::Tensor inv_freq = 1.0 / base_freqs;
  double attention_factor = 1.0;
  const RopeScaling& s = config.rope_scaling;
  if (s.type == "yarn") {
    inv_freq = yarn_inv_freq(base_freqs, s, dim, config.rope_theta);
    attention_factor = (s.mscale != 0 && s.mscale_all_dim != 0)
                           ? yarn_mscale(s.factor, s.mscale) / yarn_mscale(s.factor, s.mscale_all_dim)
                           : yarn_mscale(s.factor, 1.0);
    if (s.mscale_all_dim != 0) softmax_scale_factor_ = std::pow(yarn_mscale(s.factor, s.mscale_all_dim), 2);
  }
  auto freqs = at::arange(config.max_position_embeddings, at::kFloat).unsqueeze(1) * inv_freq.unsqueeze(0);
  cos_ = freqs.cos() * attention_factor;
  sin_ = freqs.sin() * attention_factor;
}

void RotaryEmbedding::to(const at::Device& device) {
  cos_ = cos_.to(device);
  sin_ = sin_.to(device);
  ops_ = &kernels::ops_for(device, batch_invariant_);
}

at::Tensor RotaryEmbedding::operator()(const at::Tensor& x, const at::Tensor& positions) const {
  return ops_->rotary(x, positions, cos_, sin_);
}

}  // namespace mtpserve
