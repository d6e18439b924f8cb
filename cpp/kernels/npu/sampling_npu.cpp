// Speculative verification on the NPU. Steps of greedy rows only (the lossless path) run on the device as
// batched torch ops: each draft is compared with its row's argmax. Steps with sampled rows copy
// the rows' probabilities to the host and run the CPU reference sampler, which draws the same
// counter-based uniforms as every device; a device kernel for them is future work (docs/ascend.md).
#include "kernels/npu/sampling_npu.h"

#include <ATen/ATen.h>

#include "kernels/cpu/sampling_cpu.h"

namespace mtpserve::kernels::npu {

namespace {

// Per sequence: drafts are accepted while they equal their row's argmax (first index on ties, as
// torch.argmax); the token after them is the argmax of the first row that rejected, or of the
// last row (the bonus token).
SampledTokens greedy_verify(const at::Tensor& probs, const DraftTensors& d, int64_t max_drafts) {
  const int64_t seqs = d.first_row.size(0);
  auto steps = at::arange(max_drafts + 1, d.first_row.options());
  auto rows = (d.first_row.unsqueeze(1) + steps).clamp_max(probs.size(0) - 1);
  auto best = probs.argmax(-1).index_select(0, rows.reshape({-1})).view({seqs, max_drafts + 1});
  auto in_range = steps.narrow(0, 0, max_drafts).unsqueeze(0).lt(d.num_drafts.unsqueeze(1));
  auto matches = best.narrow(1, 0, max_drafts).eq(d.drafts).logical_and(in_range);
  auto accepted = matches.to(at::kLong).cumprod(1).sum(1).unsqueeze(1);
  auto tokens = at::cat({d.drafts, at::zeros_like(accepted)}, 1).masked_fill_(steps.unsqueeze(0).ge(accepted), -1);
  return {tokens.scatter_(1, accepted, best.gather(1, accepted)), accepted.squeeze(1)};
}

}  // namespace

SampledTokens sample_and_verify(const at::Tensor& probs, const DraftTensors& d, int64_t max_drafts) {
  if (d.greedy.all().item<bool>()) return greedy_verify(probs, d, max_drafts);
  const DraftTensors host{d.first_row.cpu(), d.num_drafts.cpu(), d.drafts.cpu(), d.seed.cpu(), d.first_draw.cpu(),
                          d.greedy.cpu()};
  auto out = cpu::sample_and_verify(probs.cpu(), host, max_drafts);
  return {out.tokens.to(probs.device()), out.accepted.to(probs.device())};
}

}  // namespace mtpserve::kernels::npu
