#include "model/rms_norm.h"

#include <ATen/ATen.h>

namespace mtpserve {

at::Tensor RMSNorm::operator()(const at::Tensor& x) const {
  auto xf = x.to(at::kFloat);
  auto normed = xf * at::rsqrt(xf.pow(2).mean(-1, true) + eps_);
  return weight_ * normed.to(x.scalar_type());
}

}  // namespace mtpserve
