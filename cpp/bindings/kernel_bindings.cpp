// Kernel-level entry points for testing every device's kernels against the CPU ones: each call runs
// the kernels of the device its first tensor lives on, so the same call on CPU tensors is the
// reference.
#include <pybind11/stl.h>
#include <torch/extension.h>

#include "kernels/kernel_ops.h"
#include "kernels/latent_kv.h"

namespace py = pybind11;

namespace mtpserve::bindings {

namespace {

const kernels::KernelOps& ops(const at::Tensor& t, bool batch_invariant) {
  return kernels::ops_for(t.device(), batch_invariant);
}

void bind_layer_kernels(py::module_& m, bool bi) {
  m.def("write_latent_cache", [bi](const at::Tensor& cache, const at::Tensor& rows, const at::Tensor& slot_mapping) {
    ops(cache, bi).write_latent_cache(cache, rows, slot_mapping);
  }, py::arg("cache"), py::arg("rows"), py::arg("slot_mapping"));
  m.def(
      "mla_attention",
      [bi](const at::Tensor& q, const at::Tensor& cache, const at::Tensor& block_tables, const at::Tensor& query_start,
         const at::Tensor& context_lens, int64_t max_query_len, int64_t max_context_len, int64_t kv_lora_rank,
         double scale) {
        // The CUDA kernels plan from the device copies alone (and a CUDA graph capturing this call forbids
        // the device-to-host copy); the other devices' kernels read host copies.
        const auto host = [&](const at::Tensor& t) { return q.is_cuda() ? at::Tensor() : t.to(at::kCPU, at::kInt); };
        kernels::AttentionMetadata meta{at::Tensor(),    block_tables,          query_start,
                                        context_lens,    context_lens.size(0), max_query_len,
                                        max_context_len, host(query_start),     host(context_lens)};
        return ops(q, bi).mla_attention(q, cache, meta, kv_lora_rank, scale);
      },
      py::arg("q"), py::arg("cache"), py::arg("block_tables"), py::arg("query_start"), py::arg("context_lens"),
      py::arg("max_query_len"), py::arg("max_context_len"), py::arg("kv_lora_rank"), py::arg("scale"),
      "Fused absorbed MLA over the paged latent cache: all query rows x heads of a sequence in one pass.");
  m.def("rms_norm", [bi](const at::Tensor& x, const at::Tensor& w, double eps) { return ops(x, bi).rms_norm(x, w, eps); },
        py::arg("x"), py::arg("weight"), py::arg("eps"));
  m.def("add_rms_norm",
        [bi](const at::Tensor& x, const at::Tensor& delta, const at::Tensor& w, double eps) {
          return ops(x, bi).add_rms_norm(x, delta, w, eps);
        },
        py::arg("x"), py::arg("delta"), py::arg("weight"), py::arg("eps"));
  m.def("rotary",
        [bi](const at::Tensor& x, const at::Tensor& positions, const at::Tensor& cos, const at::Tensor& sin) {
          return ops(x, bi).rotary(x, positions, cos, sin);
        },
        py::arg("x"), py::arg("positions"), py::arg("cos"), py::arg("sin"));
  m.def("silu_and_mul", [bi](const at::Tensor& gate_up) { return ops(gate_up, bi).silu_and_mul(gate_up); },
        py::arg("gate_up"));
  m.def(
      "write_latent_kv",
      [bi](const at::Tensor& cache, const at::Tensor& kv, const at::Tensor& norm_weight, double eps,
           const at::Tensor& positions, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& slot_mapping) {
        kernels::write_latent_kv(ops(cache, bi), cache, kv, norm_weight.size(0), norm_weight, eps, positions, cos, sin,
                                 slot_mapping);
      },
      py::arg("cache"), py::arg("kv"), py::arg("norm_weight"), py::arg("eps"), py::arg("positions"), py::arg("cos"),
      py::arg("sin"), py::arg("slot_mapping"),
      "rms_norm of kv's latent part and rotary of its rope part, stored at the cache slots (fused where the device "
      "has it).");
}

void bind_moe_kernels(py::module_& m, bool bi) {
  m.def(
      "route_noaux_tc",
      [bi](const at::Tensor& logits, const at::Tensor& bias, int64_t n_group, int64_t topk_group, int64_t top_k,
         bool norm_topk_prob, double routed_scaling_factor) {
        auto r = ops(logits, bi).route_noaux_tc(logits, bias,
                                            {n_group, topk_group, top_k, norm_topk_prob, routed_scaling_factor});
        return std::make_pair(r.weights, r.experts);
      },
      py::arg("router_logits"), py::arg("correction_bias"), py::arg("n_group"), py::arg("topk_group"),
      py::arg("top_k"), py::arg("norm_topk_prob"), py::arg("routed_scaling_factor"));
  m.def(
      "moe_experts",
      [bi](const at::Tensor& x, const at::Tensor& gate_up, const at::Tensor& down, const at::Tensor& weights,
         const at::Tensor& experts) { return ops(x, bi).moe_experts(x, gate_up, down, {weights, experts}); },
      py::arg("x"), py::arg("gate_up"), py::arg("down"), py::arg("weights"), py::arg("experts"));
}

void bind_sampling_kernels(py::module_& m, bool bi) {
  m.def(
      "sampling_probs",
      [bi](const at::Tensor& logits, const at::Tensor& temperature, const at::Tensor& top_k, const at::Tensor& top_p,
         const at::Tensor& min_p, const at::Tensor& presence, const at::Tensor& frequency,
         const at::Tensor& penalty_tokens, const at::Tensor& penalty_rows) {
        kernels::SamplingTensors s{temperature, top_k, top_p, min_p, presence, frequency, penalty_tokens, penalty_rows};
        s.repetition_penalty = at::ones_like(temperature);  // the engine's own tests cover the rest
        s.prompt_tokens = s.prompt_rows = s.bias_tokens = s.bias_rows = at::empty({0}, penalty_tokens.options());
        s.bias_values = at::empty({0}, temperature.options());
        // Column by column, so that sampling_probs itself reports columns of the wrong length.
        const auto any = [](const at::Tensor& rows) { return rows.any().item<bool>(); };
        s.stages = {.sampled = any(temperature != 0), .greedy = any(temperature == 0),
                    .top_k = any((top_k > 0) & (top_k < logits.size(-1))), .top_p = any(top_p < 1.0),
                    .min_p = any(min_p > 0.0)};
        return ops(logits, bi).sampling_probs(logits, s);
      },
      py::arg("logits"), py::arg("temperature"), py::arg("top_k"), py::arg("top_p"), py::arg("min_p"),
      py::arg("presence_penalty"), py::arg("frequency_penalty"), py::arg("penalty_tokens"), py::arg("penalty_rows"));
  m.def(
      "sample_and_verify",
      [bi](const at::Tensor& probs, const at::Tensor& first_row, const at::Tensor& num_drafts, const at::Tensor& drafts,
         const at::Tensor& seed, const at::Tensor& first_draw, const at::Tensor& greedy, int64_t max_drafts) {
        auto out = ops(probs, bi).sample_and_verify(probs, {first_row, num_drafts, drafts, seed, first_draw, greedy},
                                                max_drafts);
        return std::make_pair(out.tokens, out.accepted);
      },
      py::arg("probs"), py::arg("first_row"), py::arg("num_drafts"), py::arg("drafts"), py::arg("seed"),
      py::arg("first_draw"), py::arg("greedy"), py::arg("max_drafts"),
      "Speculative verification (and plain sampling, num_drafts 0) of every sequence of a step.");
}

void bind_gemm_kernels(py::module_& m, bool bi) {
  m.def("linear", [bi](const at::Tensor& x, const at::Tensor& w) { return ops(x, bi).linear(x, w); }, py::arg("x"),
        py::arg("weight"), "x [..., K] times weight [N, K] transposed.");
  m.def("head_matmul", [bi](const at::Tensor& x, const at::Tensor& w) { return ops(x, bi).head_matmul(x, w); },
        py::arg("x"), py::arg("weight"), "Per-head matmul: x [tokens, heads, K] times weight [heads, K, N].");
}

void bind_all(py::module_& m, bool bi) {
  bind_layer_kernels(m, bi);
  bind_moe_kernels(m, bi);
  bind_sampling_kernels(m, bi);
  bind_gemm_kernels(m, bi);
}

}  // namespace

void bind_kernels(py::module_& m) {
  bind_all(m, false);
  auto invariant =
      m.def_submodule("batch_invariant", "The same kernels from the batch-invariant tables (--batch_invariant).");
  bind_all(invariant, true);
  m.def(
      "eager_rows",
      [](const std::string& device, int64_t rows) {
        const auto pad = kernels::ops_for(at::Device(device)).eager_rows;
        return pad != nullptr ? pad(rows) : rows;
      },
      py::arg("device"), py::arg("rows"),
      "The row count a forward of `rows` rows run eagerly on `device` is padded to.");
  m.def("use_npu_kernels_on_cpu", &kernels::use_npu_kernels_on_cpu, py::arg("on"),
        "Test-only: CPU tensors get the NPU kernel table, whose torch_npu ops then reach the CPU stand-ins "
        "registered under their schemas (tests/npu_stand_ins.py); holds for engines built while it is on.");
}

}  // namespace mtpserve::bindings
