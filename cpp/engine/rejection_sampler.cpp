#include "engine/rejection_sampler.h"

#include <ATen/ATen.h>

#include "engine/random_stream.h"
#include "engine/sampler.h"

namespace mtpserve {

namespace {
// Independent uniform streams for the accept test and for the replacement draw.
constexpr uint64_t kAcceptStream = 1;
constexpr uint64_t kResampleStream = 2;
}  // namespace

Verification verify_drafts(const at::Tensor& probs, const std::vector<int64_t>& drafts, bool greedy, uint64_t seed,
                           uint64_t first_draw) {
  Verification out;
  const auto k = static_cast<int64_t>(drafts.size());
  for (int64_t j = 0; j < k; ++j) {
    const uint64_t draw = first_draw + j;
    auto row = probs[j];
    if (greedy) {
      const int64_t best = row.argmax().item<int64_t>();
      out.tokens.push_back(best);
      if (best != drafts[j]) return out;
    } else {
      const double p = row[drafts[j]].item<double>();
      if (uniform(seed, draw, kAcceptStream) < p) {
        out.tokens.push_back(drafts[j]);
      } else {
        auto residual = row.clone();
        residual[drafts[j]] = 0;
        out.tokens.push_back(Sampler::draw(residual, uniform(seed, draw, kResampleStream)));
        return out;
      }
    }
    ++out.accepted;
  }
  const uint64_t bonus_draw = first_draw + k;
  out.tokens.push_back(greedy ? probs[k].argmax().item<int64_t>()
                              : Sampler::draw(probs[k], uniform(seed, bonus_draw)));
  return out;
}

}  // namespace mtpserve
