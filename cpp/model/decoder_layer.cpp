#include "model/decoder_layer.h"

#include <ATen/ATen.h>

namespace mtpserve {

DecoderLayer::DecoderLayer(const ModelConfig& c, const Weights& w, int64_t layer, const TensorParallel& tp)
    : tp_(tp),
      input_norm_(w.get(layer_prefix(layer) + "input_layernorm.weight", {c.hidden_size}), c.rms_norm_eps,
                  c.batch_invariant),
      post_attention_norm_(w.get(layer_prefix(layer) + "post_attention_layernorm.weight", {c.hidden_size}),
                           c.rms_norm_eps, c.batch_invariant),
      attention_(c, w, layer_prefix(layer) + "self_attn.", tp) {
  const std::string p = layer_prefix(layer) + "mlp.";
  if (c.is_moe_layer(layer)) {
    moe_.emplace(c, w, p, tp);
  } else {
    mlp_.emplace(w, p, c.hidden_size, c.intermediate_size, c.batch_invariant, tp);
  }
}

Residual DecoderLayer::operator()(const Residual& in, const at::Tensor& positions, const RotaryEmbedding& rope,
                                  const at::Tensor& cache, const kernels::AttentionMetadata& meta,
                                  const OutputRows* out) const {
  auto [x, normed_in] = input_norm_(in);
  auto attended = attention_(normed_in, positions, rope, cache, meta, out);
  tp_.all_reduce(attended);
  auto [h, normed] = post_attention_norm_.add(output_rows(x, out), attended);
  auto mixed = moe_ ? (*moe_)(normed) : (*mlp_)(normed);
  tp_.all_reduce(mixed);
  return {h, mixed};
}

}  // namespace mtpserve
