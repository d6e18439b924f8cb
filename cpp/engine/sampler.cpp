#include "engine/sampler.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "engine/host_columns.h"
#include "engine/token_masks.h"

namespace mtpserve {

namespace {

// Host columns of one step's sampling inputs; to_device() moves them in two copies (one per dtype).
struct HostBatch {
  std::vector<float> temperature, top_p, min_p, presence, frequency, repetition, bias_values;
  std::vector<int64_t> top_k, penalty_tokens, penalty_rows, prompt_tokens, prompt_rows, bias_tokens, bias_rows;
  std::vector<int64_t> first_row, num_drafts, drafts, seed, first_draw, greedy;
};

// Row j (the output token num_output + j) gets the request's logit_bias, and before min_tokens the
// end-of-sequence tokens masked, exactly as a decode step at that position would.
void add_bias(HostBatch& b, const SampleRequest& r, int64_t row, int64_t j, int64_t vocab) {
  const SamplingParams& p = *r.params;
  auto add = [&](int64_t token, float value) {
    if (token >= vocab) return;  // a stop token id the model cannot produce anyway
    b.bias_tokens.push_back(token), b.bias_rows.push_back(row), b.bias_values.push_back(value);
  };
  for (const auto& [token, value] : p.logit_bias) add(token, value);
  if (static_cast<int64_t>(r.output_tokens.size()) + j >= p.min_tokens) return;
  constexpr float kNever = -std::numeric_limits<float>::infinity();
  if (!p.ignore_eos) {
    for (int64_t t : r.eos_token_ids) add(t, kNever);
  }
  for (int64_t t : p.stop_token_ids) add(t, kNever);
}

HostBatch collect(const std::vector<SampleRequest>& requests, int64_t rows, int64_t vocab, int64_t max_drafts) {
  HostBatch b;
  for (auto* column : {&b.temperature, &b.top_p, &b.min_p, &b.presence, &b.frequency}) column->resize(rows);
  b.repetition.assign(rows, 1.0f);
  b.top_k.resize(rows);
  const bool penalties = std::any_of(requests.begin(), requests.end(), [](const SampleRequest& r) {
    return r.params->presence_penalty != 0 || r.params->frequency_penalty != 0 || r.params->repetition_penalty != 1;
  });
  for (const auto& r : requests) {
    const SamplingParams& p = *r.params;
    const auto k = static_cast<int64_t>(r.drafts.size());
    for (int64_t j = 0; j <= k; ++j) {
      const int64_t row = r.first_row + j;
      b.temperature[row] = p.greedy() ? 0.0f : static_cast<float>(p.temperature);
      b.top_p[row] = static_cast<float>(p.top_p);
      b.min_p[row] = static_cast<float>(p.min_p);
      b.presence[row] = static_cast<float>(p.presence_penalty);
      b.frequency[row] = static_cast<float>(p.frequency_penalty);
      b.top_k[row] = p.top_k;
      add_bias(b, r, row, j, vocab);
      if (!penalties) continue;
      if (p.repetition_penalty != 1) {
        b.repetition[row] = static_cast<float>(p.repetition_penalty);
        for (int64_t t : r.prompt_tokens) b.prompt_tokens.push_back(t), b.prompt_rows.push_back(row);
      }
      // Row j is judged with the drafts before it counted as output.
      for (int64_t t : r.output_tokens) b.penalty_tokens.push_back(t), b.penalty_rows.push_back(row);
      for (int64_t d = 0; d < j; ++d) b.penalty_tokens.push_back(r.drafts[d]), b.penalty_rows.push_back(row);
    }
    b.first_row.push_back(r.first_row);
    b.num_drafts.push_back(k);
    for (int64_t d = 0; d < max_drafts; ++d) b.drafts.push_back(d < k ? r.drafts[d] : 0);
    int64_t seed;
    std::memcpy(&seed, &r.seed, sizeof(seed));
    b.seed.push_back(seed);
    b.first_draw.push_back(static_cast<int64_t>(r.first_draw));
    b.greedy.push_back(p.greedy());
  }
  return b;
}

kernels::SamplingStages stages_of(const std::vector<SampleRequest>& requests, int64_t vocab) {
  kernels::SamplingStages stages{.sampled = false, .greedy = false, .top_k = false, .top_p = false, .min_p = false};
  for (const auto& r : requests) {
    const SamplingParams& p = *r.params;
    if (p.greedy()) {
      stages.greedy = true;
      continue;
    }
    stages.sampled = true;
    stages.top_k |= p.top_k > 0 && p.top_k < vocab;
    stages.top_p |= p.top_p < 1.0;
    stages.min_p |= p.min_p > 0.0;
  }
  return stages;
}

}  // namespace

std::vector<SampledSequence> Sampler::sample(const at::Tensor& logits,
                                             const std::vector<SampleRequest>& requests) const {
  if (requests.empty()) return {};
  const at::Tensor masked = mask_logits(logits, requests, masker_.get());
  const bool argmax = std::all_of(requests.begin(), requests.end(),
                                  [](const SampleRequest& r) { return r.params->argmax_only(); });
  std::vector<SampledSequence> out = argmax ? sample_argmax(masked, requests) : sample_distributions(masked, requests);
  add_logprobs(logits, requests, out);
  return out;
}

std::vector<SampledSequence> Sampler::sample_distributions(const at::Tensor& logits,
                                                           const std::vector<SampleRequest>& requests) const {
  int64_t max_drafts = 0;
  for (const auto& r : requests) max_drafts = std::max(max_drafts, static_cast<int64_t>(r.drafts.size()));
  const HostBatch b = collect(requests, logits.size(0), logits.size(1), max_drafts);
  auto f = to_device<float>({&b.temperature, &b.top_p, &b.min_p, &b.presence, &b.frequency, &b.repetition,
                             &b.bias_values},
                            at::kFloat, device_);
  auto i = to_device<int64_t>({&b.top_k, &b.penalty_tokens, &b.penalty_rows, &b.first_row, &b.num_drafts, &b.drafts,
                               &b.seed, &b.first_draw, &b.greedy, &b.prompt_tokens, &b.prompt_rows, &b.bias_tokens,
                               &b.bias_rows},
                              at::kLong, device_);
  const int64_t seqs = static_cast<int64_t>(requests.size());
  auto probs = ops_->sampling_probs(logits.to(at::kFloat),
                                    {f[0], i[0], f[1], f[2], f[3], f[4], i[1], i[2], f[5], i[9], i[10], i[11], i[12],
                                     f[6], stages_of(requests, logits.size(1))});
  auto sampled = ops_->sample_and_verify(probs, {i[3], i[4], i[5].view({seqs, max_drafts}), i[6], i[7],
                                                 i[8].to(at::kBool)},
                                         max_drafts);
  auto host = at::cat({sampled.tokens.reshape({-1}), sampled.accepted}).cpu();
  const int64_t* tokens = host.data_ptr<int64_t>();
  const int64_t* accepted = tokens + seqs * (max_drafts + 1);
  std::vector<SampledSequence> out(requests.size());
  for (int64_t s = 0; s < seqs; ++s) {
    out[s].accepted = accepted[s];
    out[s].tokens.assign(tokens + s * (max_drafts + 1), tokens + s * (max_drafts + 1) + accepted[s] + 1);
  }
  return out;
}

// Every token is its row's argmax: one reduction and one copy, and the verification (a draft is accepted
// while it equals its row's argmax, as sample_and_verify does for greedy rows) on the host, instead of
// the distributions' launches: a small greedy decode step is bound by its launches.
std::vector<SampledSequence> Sampler::sample_argmax(const at::Tensor& logits,
                                                    const std::vector<SampleRequest>& requests) const {
  auto host = logits.argmax(-1).cpu();
  const int64_t* best = host.data_ptr<int64_t>();
  std::vector<SampledSequence> out(requests.size());
  for (size_t s = 0; s < requests.size(); ++s) {
    const SampleRequest& r = requests[s];
    for (size_t j = 0;; ++j) {
      const int64_t token = best[r.first_row + static_cast<int64_t>(j)];
      out[s].tokens.push_back(token);
      if (j == r.drafts.size() || r.drafts[j] != token) break;
      out[s].accepted += 1;
    }
  }
  return out;
}

void Sampler::add_logprobs(const at::Tensor& logits, const std::vector<SampleRequest>& requests,
                           std::vector<SampledSequence>& out) const {
  std::vector<int64_t> rows, tokens;
  int64_t top_n = 0;
  for (size_t s = 0; s < requests.size(); ++s) {
    if (requests[s].params->logprobs < 0) continue;
    top_n = std::max(top_n, requests[s].params->logprobs);
    for (size_t j = 0; j < out[s].tokens.size(); ++j) {
      rows.push_back(requests[s].first_row + static_cast<int64_t>(j));
      tokens.push_back(out[s].tokens[j]);
    }
  }
  if (rows.empty()) return;
  auto index = at::tensor(rows, at::kLong).to(device_);
  auto chosen_ids = at::tensor(tokens, at::kLong).to(device_).unsqueeze(1);
  auto lp = at::log_softmax(logits.index_select(0, index).to(at::kFloat), -1);
  auto chosen = lp.gather(1, chosen_ids);
  auto rank = (lp > chosen).sum(1, false, at::kFloat) + 1;
  auto [top_values, top_ids] = lp.topk(std::max<int64_t>(top_n, 1));
  auto host = at::cat({chosen.squeeze(1), rank, top_values.reshape({-1}), top_ids.to(at::kFloat).reshape({-1})}).cpu();
  const float* v = host.data_ptr<float>();
  const auto n = static_cast<int64_t>(rows.size()), width = top_values.size(1);
  int64_t r = 0;
  for (size_t s = 0; s < requests.size(); ++s) {
    const int64_t want = requests[s].params->logprobs;
    if (want < 0) continue;
    for (int64_t token : out[s].tokens) {
      TokenLogprobs t{token, v[r], static_cast<int64_t>(v[n + r]), {}};
      for (int64_t j = 0; j < want; ++j) {
        t.top.emplace_back(static_cast<int64_t>(v[2 * n + n * width + r * width + j]), v[2 * n + r * width + j]);
      }
      out[s].logprobs.push_back(std::move(t));
      ++r;
    }
  }
}

}  // namespace mtpserve
