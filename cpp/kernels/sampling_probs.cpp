#include "kernels/sampling_probs.h"

#include <ATen/ATen.h>

#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

namespace mtpserve::kernels {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

void check(const at::Tensor& logits, const SamplingTensors& s) {
  if (logits.dim() != 2 || !at::isFloatingType(logits.scalar_type())) {
    throw std::invalid_argument("sampling_probs: logits must be a floating [rows, vocab] tensor");
  }
  const int64_t rows = logits.size(0);
  const std::pair<const char*, const at::Tensor*> columns[] = {
      {"temperature", &s.temperature}, {"top_k", &s.top_k}, {"top_p", &s.top_p}, {"min_p", &s.min_p},
      {"presence_penalty", &s.presence_penalty}, {"frequency_penalty", &s.frequency_penalty},
      {"repetition_penalty", &s.repetition_penalty}};
  for (const auto& [name, column] : columns) {
    if (column->dim() != 1 || column->size(0) != rows || column->device() != logits.device()) {
      throw std::invalid_argument(std::string("sampling_probs: ") + name + " must hold one entry per logits row (" +
                                  std::to_string(rows) + ") on the logits' device");
    }
  }
  if (s.penalty_tokens.numel() != s.penalty_rows.numel()) {
    throw std::invalid_argument("sampling_probs: penalty_tokens and penalty_rows must have the same length");
  }
  if (s.prompt_tokens.numel() != s.prompt_rows.numel() || s.bias_tokens.numel() != s.bias_rows.numel() ||
      s.bias_values.numel() != s.bias_rows.numel()) {
    throw std::invalid_argument("sampling_probs: prompt and bias tokens, rows and values must have equal lengths");
  }
}

// vLLM's order: the bias (logit_bias, min_tokens) first, then the repetition penalty over the
// prompt's and the output's tokens.
at::Tensor biased(const at::Tensor& logits, const SamplingTensors& s) {
  auto out = logits;
  if (s.bias_rows.numel() > 0) {
    out = out.index_put({s.bias_rows, s.bias_tokens}, s.bias_values, /*accumulate=*/true);
  }
  if (s.prompt_rows.numel() == 0) return out;  // no row has a repetition penalty (prompts are never empty)
  auto seen = at::zeros_like(out, out.options().dtype(at::kBool));
  seen.index_put_({s.prompt_rows, s.prompt_tokens}, at::ones({s.prompt_rows.numel()}, seen.options()));
  seen.index_put_({s.penalty_rows, s.penalty_tokens}, at::ones({s.penalty_rows.numel()}, seen.options()));
  auto rp = s.repetition_penalty.unsqueeze(1);
  return at::where(seen & (rp != 1.0), at::where(out > 0, out / rp, out * rp), out);
}

// logits - frequency * count - presence * [count > 0], counting each row's penalty tokens; the
// order of operations is the per-row sampler's, so the results match it bit for bit.
at::Tensor penalised(const at::Tensor& logits, const SamplingTensors& s) {
  if (s.penalty_tokens.numel() == 0) return logits;
  auto counts = at::zeros_like(logits);
  counts.index_put_({s.penalty_rows, s.penalty_tokens}, at::ones({s.penalty_tokens.numel()}, logits.options()),
                    /*accumulate=*/true);
  return logits - s.frequency_penalty.unsqueeze(1) * counts -
         s.presence_penalty.unsqueeze(1) * (counts > 0).to(at::kFloat);
}

// Temperature, then top-k, top-p and min-p as masks over each sorted row, each mask judged on the
// softmax after the previous one; probabilities back in vocabulary order. A row whose parameter
// is off is left untouched by that mask, so the rounding of a cumulative sum never trims it.
at::Tensor filtered(const at::Tensor& logits, const SamplingTensors& s, const at::Tensor& greedy) {
  const int64_t vocab = logits.size(1);
  // Greedy rows (temperature 0) are replaced by their one-hot later: here they divide by 1 and
  // then become constant, which the sort gets through several times faster than logits.
  auto temperature = at::where(greedy, at::ones_like(s.temperature), s.temperature).unsqueeze(1);
  auto scaled = (logits / temperature).masked_fill_(greedy.unsqueeze(1), 0.0);
  // Stable, so tied logits keep vocabulary order on every device and top-k cuts the same ones.
  auto [sorted, order] = scaled.sort(/*stable=*/true, /*dim=*/-1, /*descending=*/true);
  auto top_k = s.top_k.unsqueeze(1);
  sorted.masked_fill_((at::arange(vocab, top_k.options()).unsqueeze(0) >= top_k) & (top_k > 0), kNegInf);
  auto probs = at::softmax(sorted, -1);
  // Keep the smallest prefix whose mass reaches top_p (the first token always stays).
  auto top_p = s.top_p.unsqueeze(1);
  sorted.masked_fill_((at::cumsum(probs, -1) - probs >= top_p) & (top_p < 1.0), kNegInf);
  probs = at::softmax(sorted, -1);
  auto min_p = s.min_p.unsqueeze(1);
  sorted.masked_fill_((probs < probs.narrow(1, 0, 1) * min_p) & (min_p > 0.0), kNegInf);
  probs = at::softmax(sorted, -1);
  return at::empty_like(probs).scatter_(1, order, probs);
}

}  // namespace

at::Tensor sampling_probs(const at::Tensor& logits, const SamplingTensors& s) {
  check(logits, s);
  auto adjusted = penalised(biased(logits.to(at::kFloat), s), s);
  auto greedy = s.temperature == 0;
  auto one_hot = at::zeros_like(adjusted).scatter_(1, adjusted.argmax(-1, /*keepdim=*/true), 1.0);
  if (s.all_greedy) return one_hot;
  return at::where(greedy.unsqueeze(1), one_hot, filtered(adjusted, s, greedy));
}

}  // namespace mtpserve::kernels
