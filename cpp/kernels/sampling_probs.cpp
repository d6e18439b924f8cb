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

// Top-k, top-p and min-p as masks over each sorted row of the scaled logits, each mask judged on the
// softmax after the previous one; probabilities back in vocabulary order. A row whose parameter is
// off is left untouched by that mask, so the rounding of a cumulative sum never trims it, and a stage
// no row uses is skipped without changing any row's bits.
at::Tensor filtered(const at::Tensor& scaled, const SamplingTensors& s, const at::Tensor& greedy) {
  const int64_t vocab = scaled.size(1);
  // Greedy rows are replaced by their one-hot later: constant rows, which the sort gets through
  // several times faster than logits.
  const auto rows = s.stages.greedy ? scaled.masked_fill(greedy.unsqueeze(1), 0.0) : scaled;
  // Stable, so tied logits keep vocabulary order on every device and top-k cuts the same ones.
  auto [sorted, order] = rows.sort(/*stable=*/true, /*dim=*/-1, /*descending=*/true);
  if (s.stages.top_k) {
    auto top_k = s.top_k.unsqueeze(1);
    sorted.masked_fill_((at::arange(vocab, top_k.options()).unsqueeze(0) >= top_k) & (top_k > 0), kNegInf);
  }
  if (s.stages.top_p) {
    // Keep the smallest prefix whose mass reaches top_p (the first token always stays).
    auto probs = at::softmax(sorted, -1);
    auto top_p = s.top_p.unsqueeze(1);
    sorted.masked_fill_((at::cumsum(probs, -1) - probs >= top_p) & (top_p < 1.0), kNegInf);
  }
  if (s.stages.min_p) {
    auto probs = at::softmax(sorted, -1);
    auto min_p = s.min_p.unsqueeze(1);
    sorted.masked_fill_((probs < probs.narrow(1, 0, 1) * min_p) & (min_p > 0.0), kNegInf);
  }
  return at::empty_like(sorted).scatter_(1, order, at::softmax(sorted, -1));
}

// The rows with top-k, top-p or min-p on, [rows, 1].
at::Tensor filtering_rows(const SamplingTensors& s, int64_t vocab) {
  return (((s.top_k > 0) & (s.top_k < vocab)) | (s.top_p < 1.0) | (s.min_p > 0.0)).unsqueeze(1);
}

at::Tensor one_hot_argmax(const at::Tensor& logits) {
  return at::zeros_like(logits).scatter_(1, logits.argmax(-1, /*keepdim=*/true), 1.0);
}

}  // namespace

at::Tensor sampling_probs(const at::Tensor& logits, const SamplingTensors& s) {
  check(logits, s);
  auto adjusted = penalised(biased(logits.to(at::kFloat), s), s);
  if (!s.stages.sampled) return one_hot_argmax(adjusted);
  const at::Tensor greedy = s.stages.greedy ? s.temperature == 0 : at::Tensor();
  // Greedy rows divide by 1: their one-hot replaces them at the end.
  const auto temperature = s.stages.greedy ? at::where(greedy, at::ones_like(s.temperature), s.temperature)
                                           : s.temperature;
  const auto scaled = adjusted / temperature.unsqueeze(1);
  auto probs = at::softmax(scaled, -1);
  if (s.stages.top_k || s.stages.top_p || s.stages.min_p) {
    probs = at::where(filtering_rows(s, scaled.size(1)), filtered(scaled, s, greedy), probs);
  }
  if (!s.stages.greedy) return probs;
  return at::where(greedy.unsqueeze(1), one_hot_argmax(adjusted), probs);
}

}  // namespace mtpserve::kernels
