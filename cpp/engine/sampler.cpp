#include "engine/sampler.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>

#include "engine/random_stream.h"

namespace mtpserve {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

bool any_penalty(const std::vector<SamplingRow>& rows) {
  return std::any_of(rows.begin(), rows.end(), [](const SamplingRow& r) {
    return r.params->presence_penalty != 0 || r.params->frequency_penalty != 0;
  });
}

// logits - frequency * count - presence * [count > 0], over each row's output tokens so far.
at::Tensor apply_penalties(at::Tensor logits, const std::vector<SamplingRow>& rows) {
  if (!any_penalty(rows)) return logits;
  const int64_t n = logits.size(0), vocab = logits.size(1);
  auto counts = at::zeros({n, vocab}, at::kFloat);
  auto c = counts.accessor<float, 2>();
  std::vector<float> frequency(n), presence(n);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t t : rows[i].output_tokens) c[i][t] += 1;
    frequency[i] = rows[i].params->frequency_penalty;
    presence[i] = rows[i].params->presence_penalty;
  }
  counts = counts.to(logits.device());
  auto column = [&](std::vector<float>& v) { return at::tensor(v).to(logits.device()).unsqueeze(1); };
  return logits - column(frequency) * counts - column(presence) * (counts > 0).to(at::kFloat);
}

// Temperature, then top-k, top-p and min-p as masks over the sorted row; returns probabilities.
at::Tensor filtered_probs(const at::Tensor& logits, const SamplingParams& p) {
  auto [sorted, order] = (logits / p.temperature).sort(-1, /*descending=*/true);
  const int64_t vocab = sorted.size(0);
  if (p.top_k > 0 && p.top_k < vocab) sorted.narrow(0, p.top_k, vocab - p.top_k).fill_(kNegInf);
  auto probs = at::softmax(sorted, -1);
  if (p.top_p < 1.0) {
    // Keep the smallest prefix whose mass reaches top_p (the first token always stays).
    auto before = at::cumsum(probs, -1) - probs;
    sorted.masked_fill_(before >= p.top_p, kNegInf);
    probs = at::softmax(sorted, -1);
  }
  if (p.min_p > 0.0) {
    sorted.masked_fill_(probs < probs[0] * p.min_p, kNegInf);
    probs = at::softmax(sorted, -1);
  }
  return at::zeros_like(probs).scatter_(0, order, probs);
}

TokenLogprobs logprobs_of(const at::Tensor& raw_logprobs, int64_t token, int64_t top_n) {
  TokenLogprobs out{token, raw_logprobs[token].item<float>(), 0, {}};
  out.rank = (raw_logprobs > out.logprob).sum().item<int64_t>() + 1;
  if (top_n > 0) {
    auto [values, ids] = raw_logprobs.topk(top_n);
    for (int64_t i = 0; i < top_n; ++i) out.top.emplace_back(ids[i].item<int64_t>(), values[i].item<float>());
  }
  return out;
}

}  // namespace

TokenLogprobs Sampler::token_logprobs(const at::Tensor& logits_row, int64_t token, int64_t top_n) {
  return logprobs_of(at::log_softmax(logits_row.to(at::kFloat).cpu(), -1), token, top_n);
}

int64_t Sampler::draw(const at::Tensor& probs_row, double u) {
  auto cdf = at::cumsum(probs_row.to(at::kDouble), 0);
  const double target = u * cdf[-1].item<double>();
  auto index = at::searchsorted(cdf, at::scalar_tensor(target, at::kDouble), /*out_int32=*/false, /*right=*/true);
  // Never land on a zero-probability tail token through rounding.
  int64_t token = std::min<int64_t>(index.item<int64_t>(), probs_row.size(0) - 1);
  while (token > 0 && probs_row[token].item<float>() == 0.0f) --token;
  return token;
}

at::Tensor Sampler::probabilities(const at::Tensor& logits, const std::vector<SamplingRow>& rows) const {
  auto adjusted = apply_penalties(logits.to(at::kFloat).cpu(), rows);
  auto probs = at::empty_like(adjusted);
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].params->greedy()) {
      probs[i].zero_()[adjusted[i].argmax().item<int64_t>()] = 1.0f;
    } else {
      probs[i].copy_(filtered_probs(adjusted[i], *rows[i].params));
    }
  }
  return probs;
}

SampleResult Sampler::sample(const at::Tensor& logits, const std::vector<SamplingRow>& rows) const {
  auto probs = probabilities(logits, rows);
  SampleResult result;
  result.logprobs.resize(rows.size());
  at::Tensor raw_logprobs;
  for (size_t i = 0; i < rows.size(); ++i) {
    const SamplingRow& row = rows[i];
    const int64_t token = row.params->greedy() ? probs[i].argmax().item<int64_t>()
                                               : draw(probs[i], uniform(row.seed, row.draw));
    result.tokens.push_back(token);
    if (row.params->logprobs >= 0) {
      if (!raw_logprobs.defined()) raw_logprobs = at::log_softmax(logits.to(at::kFloat).cpu(), -1);
      result.logprobs[i] = logprobs_of(raw_logprobs[i], token, row.params->logprobs);
    }
  }
  return result;
}

}  // namespace mtpserve
