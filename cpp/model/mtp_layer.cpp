#include "model/mtp_layer.h"

#include <ATen/ATen.h>

namespace mtpserve {

namespace {
at::Tensor own_or(const Weights& w, const std::string& name, const at::Tensor& fallback) {
  return w.contains(name) ? w.get(name, fallback.sizes().vec()) : fallback;
}
}  // namespace

MtpLayer::MtpLayer(const ModelConfig& c, const Weights& w, int64_t layer, const at::Tensor& target_embedding,
                   const at::Tensor& target_head, const TensorParallel& tp)
    : tp_(tp),
      embed_(own_or(w, layer_prefix(layer) + "embed_tokens.weight", target_embedding)),
      head_(w.contains(layer_prefix(layer) + "shared_head.head.weight")
                ? w.get_shard(layer_prefix(layer) + "shared_head.head.weight", {c.vocab_size, c.hidden_size},
                              tp.rank(), tp.size())
                : target_head),
      eh_proj_(w.get(layer_prefix(layer) + "eh_proj.weight", {c.hidden_size, 2 * c.hidden_size})),
      enorm_(w.get(layer_prefix(layer) + "enorm.weight", {c.hidden_size}), c.rms_norm_eps, c.batch_invariant),
      hnorm_(w.get(layer_prefix(layer) + "hnorm.weight", {c.hidden_size}), c.rms_norm_eps, c.batch_invariant),
      head_norm_(w.get(layer_prefix(layer) + "shared_head.norm.weight", {c.hidden_size}),
                 c.rms_norm_eps, c.batch_invariant),
      block_(c, w, layer, tp),
      ops_(&kernels::ops_for(eh_proj_.device(), c.batch_invariant)) {}

at::Tensor MtpLayer::forward(const at::Tensor& token_ids, const at::Tensor& previous_hidden,
                             const at::Tensor& positions, const RotaryEmbedding& rope, const at::Tensor& cache,
                             const kernels::AttentionMetadata& meta, const OutputRows* out) const {
  auto joined = at::cat({enorm_(at::embedding(embed_, token_ids)), hnorm_(previous_hidden)}, -1);
  return head_norm_(block_(Residual{ops_->linear(joined, eh_proj_), {}}, positions, rope, cache, meta, out)).second;
}

}  // namespace mtpserve
