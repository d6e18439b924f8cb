#include "engine/prompt_logprobs.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace mtpserve {

std::vector<TokenLogprobs> token_logprobs(const at::Tensor& logits, const std::vector<int64_t>& tokens,
                                          const std::vector<int64_t>& top_n) {
  if (tokens.empty()) return {};
  const int64_t width = std::max<int64_t>(1, *std::max_element(top_n.begin(), top_n.end()));
  auto lp = at::log_softmax(logits.to(at::kFloat), -1);
  auto chosen = lp.gather(1, at::tensor(tokens, at::kLong).to(lp.device()).unsqueeze(1));
  auto rank = (lp > chosen).sum(1, false, at::kFloat) + 1;
  auto [top_values, top_ids] = lp.topk(width);
  // One device-to-host copy; token ids are exact in float32 below 2^24.
  auto host = at::cat({chosen.squeeze(1), rank, top_values.reshape({-1}), top_ids.to(at::kFloat).reshape({-1})}).cpu();
  const float* v = host.data_ptr<float>();
  const auto n = static_cast<int64_t>(tokens.size());
  std::vector<TokenLogprobs> out;
  for (int64_t r = 0; r < n; ++r) {
    TokenLogprobs t{tokens[r], v[r], static_cast<int64_t>(v[n + r]), {}};
    for (int64_t j = 0; j < top_n[r]; ++j) {
      t.top.emplace_back(static_cast<int64_t>(v[2 * n + n * width + r * width + j]), v[2 * n + r * width + j]);
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace mtpserve
