#include "engine/token_masks.h"

#include <ATen/ATen.h>

#include <limits>
#include <stdexcept>

namespace mtpserve {

at::Tensor mask_logits(const at::Tensor& logits, const std::vector<SampleRequest>& requests, TokenMasker* masker) {
  std::vector<MaskQuery> queries;
  for (const auto& r : requests) {
    if (r.params->constraint) queries.push_back({r.params->constraint.get(), r.output_tokens, r.drafts, r.first_row});
  }
  if (queries.empty()) return logits;
  if (masker == nullptr) throw std::logic_error("a request has a grammar but the engine has no token masker");
  const int64_t rows = logits.size(0), vocab = logits.size(1), words = (vocab + 31) / 32;
  auto host = at::full({rows, words}, -1, at::TensorOptions(at::kInt).pinned_memory(logits.is_cuda()));
  masker->fill(queries, host.data_ptr<int32_t>(), rows, words);
  auto packed = host.to(logits.device(), /*non_blocking=*/true);
  auto bits = packed.unsqueeze(-1).bitwise_right_shift(at::arange(32, packed.options())).bitwise_and(1);
  auto forbidden = bits.reshape({rows, words * 32}).narrow(1, 0, vocab).eq(0);
  return logits.masked_fill(forbidden, -std::numeric_limits<float>::infinity());
}

}  // namespace mtpserve
