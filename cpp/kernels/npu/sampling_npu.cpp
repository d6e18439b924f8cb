// Speculative verification on the NPU as batched torch ops over [seqs, max_drafts + 1] (no loop over
// sequences). The counter-based uniforms (kernels/random_stream.h) are computed on the host from the
// small seed and draw-index columns, so the draws are exactly those of every other device; the
// distributions stay on the device. Every step already reads its sampled tokens back to the host.
#include "kernels/npu/sampling_npu.h"

#include <ATen/ATen.h>

#include "kernels/random_stream.h"

namespace mtpserve::kernels::npu {

namespace {

// [seqs, max_drafts + 1, 3] float64: uniform(seed, first_draw + j, stream) for the accept test, the
// resample after a rejection and the plain draw (the bonus token).
at::Tensor uniforms(const DraftTensors& d, int64_t max_drafts) {
  auto seed = d.seed.to(at::kCPU).contiguous(), first = d.first_draw.to(at::kCPU).contiguous();
  const int64_t seqs = seed.numel();
  auto out = at::empty({seqs, max_drafts + 1, 3}, at::kDouble);
  auto u = out.accessor<double, 3>();
  for (int64_t s = 0; s < seqs; ++s) {
    const auto sd = static_cast<uint64_t>(seed.data_ptr<int64_t>()[s]);
    for (int64_t j = 0; j <= max_drafts; ++j) {
      const auto n = static_cast<uint64_t>(first.data_ptr<int64_t>()[s] + j);
      u[s][j][0] = uniform(sd, n, kAcceptStream);
      u[s][j][1] = uniform(sd, n, kResampleStream);
      u[s][j][2] = uniform(sd, n, kDrawStream);
    }
  }
  return out.to(d.seed.device());
}

// Inverse-CDF draw per row of p [rows, vocab] with `excluded` [rows] (-1: none) removed: the first
// token whose float64 cumulative mass exceeds u * total, clamped to the vocabulary and backed off
// to the nearest lower token of non-zero mass (what only rounding at the end reaches), as the CPU
// reference draws.
at::Tensor draw(const at::Tensor& p, const at::Tensor& u, const at::Tensor& excluded) {
  const int64_t vocab = p.size(1);
  auto index = at::arange(vocab, excluded.options()).unsqueeze(0);
  auto mass = p.to(at::kDouble).masked_fill(index.eq(excluded.unsqueeze(1)), 0.0);
  auto cdf = mass.cumsum(1);
  auto target = (u * cdf.select(1, vocab - 1)).unsqueeze(1).contiguous();
  auto token = at::searchsorted(cdf, target, /*out_int32=*/false, /*right=*/true).clamp_max(vocab - 1);
  auto last_nonzero = std::get<0>(at::where(mass.gt(0), index, -1).cummax(1));
  return last_nonzero.gather(1, token).clamp_min(0).squeeze(1);
}

}  // namespace

// For draft j of a sequence (row first_row + j): greedy accepts it iff it is the row's argmax,
// sampled iff u_accept < p(d). The first rejected position gets the argmax (greedy) or a draw with
// the draft removed; after all drafts the bonus is the last row's argmax or plain draw.
SampledTokens sample_and_verify(const at::Tensor& probs, const DraftTensors& d, int64_t max_drafts) {
  const int64_t seqs = d.first_row.size(0);
  auto steps = at::arange(max_drafts + 1, d.first_row.options());
  auto rows = (d.first_row.unsqueeze(1) + steps).clamp_max(probs.size(0) - 1);
  auto u = uniforms(d, max_drafts);
  auto best = probs.argmax(-1).index_select(0, rows.reshape({-1})).view({seqs, max_drafts + 1});
  auto drafted = d.drafts.narrow(1, 0, max_drafts);
  // Drafts past a sequence's own count are padding (any value): looked up in range, never accepted.
  auto p_draft = probs.index({rows.narrow(1, 0, max_drafts), drafted.clamp(0, probs.size(1) - 1)});
  auto greedy = d.greedy.unsqueeze(1);
  auto accept = at::where(greedy, best.narrow(1, 0, max_drafts).eq(drafted),
                          u.select(2, 0).narrow(1, 0, max_drafts).lt(p_draft.to(at::kDouble)));
  accept.logical_and_(steps.narrow(0, 0, max_drafts).unsqueeze(0).lt(d.num_drafts.unsqueeze(1)));
  auto accepted = accept.to(at::kLong).cumprod(1).sum(1).unsqueeze(1);
  auto rejected = accepted.lt(d.num_drafts.unsqueeze(1));
  auto padded_drafts = at::cat({d.drafts, at::full_like(accepted, -1)}, 1);
  auto excluded = at::where(rejected, padded_drafts.gather(1, accepted), -1).squeeze(1);
  auto u_draw = at::where(rejected, u.select(2, 1).gather(1, accepted), u.select(2, 2).gather(1, accepted));
  auto drawn = draw(probs.index_select(0, rows.gather(1, accepted).squeeze(1)), u_draw.squeeze(1), excluded);
  auto token = at::where(d.greedy, best.gather(1, accepted).squeeze(1), drawn).unsqueeze(1);
  auto tokens = padded_drafts.masked_fill(steps.unsqueeze(0).ge(accepted), -1).scatter_(1, accepted, token);
  return {tokens, accepted.squeeze(1)};
}

}  // namespace mtpserve::kernels::npu
