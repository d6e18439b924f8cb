#include "model/deepseek_v3.h"

#include <ATen/ATen.h>

#include <stdexcept>

namespace mtpserve {

namespace {

// A tied head: this rank's rows of the (whole) embedding.
at::Tensor vocabulary_shard(const at::Tensor& embedding, const TensorParallel& tp) {
  if (tp.size() == 1) return embedding;
  const int64_t part = shard_size(embedding.size(0), tp.size(), "vocab_size");
  return embedding.narrow(0, tp.rank() * part, part).contiguous();
}

}  // namespace

DeepSeekV3::DeepSeekV3(const ModelConfig& c, const Weights& w, const TensorParallel& tp)
    : config_(c),
      tp_(tp),
      rope_(c),
      embed_(w.get("model.embed_tokens.weight", {c.vocab_size, c.hidden_size})),
      lm_head_(c.tie_word_embeddings
                   ? vocabulary_shard(embed_, tp)
                   : w.get_shard("lm_head.weight", {c.vocab_size, c.hidden_size}, tp.rank(), tp.size())),
      norm_(w.get("model.norm.weight", {c.hidden_size}), c.rms_norm_eps, c.batch_invariant),
      ops_(&kernels::ops_for(embed_.device(), c.batch_invariant)) {
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) layers_.emplace_back(c, w, i, tp);
  rope_.to(embed_.device());
}

at::Tensor DeepSeekV3::forward(const at::Tensor& token_ids, const at::Tensor& positions,
                               const std::vector<at::Tensor>& caches, const kernels::AttentionMetadata& meta) const {
  if (caches.size() != layers_.size()) {
    throw std::invalid_argument("expected " + std::to_string(layers_.size()) + " layer caches, got " +
                                std::to_string(caches.size()));
  }
  Residual stream{at::embedding(embed_, token_ids), {}};
  for (size_t i = 0; i < layers_.size(); ++i) stream = layers_[i](stream, positions, rope_, caches[i], meta);
  return norm_(stream).second;
}

at::Tensor DeepSeekV3::logits(const at::Tensor& hidden) const {
  return tp_.all_gather_last_dim(ops_->linear(hidden, lm_head_));
}

}  // namespace mtpserve
