// Model-level bindings: build the target model and MTP layer from checkpoint tensors and run
// forwards over a batch of sequences laid out in the paged latent cache.
#include <pybind11/stl.h>
#include <torch/extension.h>

#include "model/deepseek_v3.h"
#include "model/moe.h"
#include "model/mtp_layer.h"

namespace py = pybind11;

namespace mtpserve::bindings {

namespace {

using TensorMap = std::unordered_map<std::string, at::Tensor>;

kernels::AttentionMetadata metadata(const std::vector<int64_t>& query_start, const std::vector<int64_t>& context_lens,
                                    const at::Tensor& block_tables, at::Tensor slot_mapping) {
  if (query_start.size() != context_lens.size() + 1) {
    throw std::invalid_argument("query_start must have one more entry than context_lens");
  }
  auto on_device = [&](const std::vector<int64_t>& v) {
    return at::tensor(v, at::kLong).to(block_tables.device()).to(at::kInt);
  };
  kernels::AttentionMetadata meta{std::move(slot_mapping), block_tables.to(at::kInt), on_device(query_start),
                                  on_device(context_lens), static_cast<int64_t>(context_lens.size())};
  meta.host_query_start = at::tensor(query_start, at::kLong).to(at::kInt);
  meta.host_context_lens = at::tensor(context_lens, at::kLong).to(at::kInt);
  for (size_t s = 0; s < context_lens.size(); ++s) {
    meta.max_query_len = std::max(meta.max_query_len, query_start[s + 1] - query_start[s]);
    meta.max_context_len = std::max(meta.max_context_len, context_lens[s]);
  }
  return meta;
}

// The last n_s rows of each sequence s (query_start as in metadata()), and where each sequence's rows begin among them.
std::pair<std::vector<int64_t>, std::vector<int64_t>> last_rows(const std::vector<int64_t>& query_start,
                                                                const std::vector<int64_t>& per_seq) {
  if (per_seq.size() + 1 != query_start.size()) throw std::invalid_argument("outputs_per_seq: one count per sequence");
  std::vector<int64_t> rows, starts{0};
  for (size_t s = 0; s < per_seq.size(); ++s) {
    if (per_seq[s] < 0 || per_seq[s] > query_start[s + 1] - query_start[s]) {
      throw std::invalid_argument("outputs_per_seq: sequence " + std::to_string(s) + " has fewer rows than that");
    }
    for (int64_t r = query_start[s + 1] - per_seq[s]; r < query_start[s + 1]; ++r) rows.push_back(r);
    starts.push_back(static_cast<int64_t>(rows.size()));
  }
  return {rows, starts};
}

void bind_config(py::module_& m) {
  py::class_<RopeScaling>(m, "RopeScaling")
      .def(py::init<>())
      .def_readwrite("type", &RopeScaling::type)
      .def_readwrite("factor", &RopeScaling::factor)
      .def_readwrite("original_max_position_embeddings", &RopeScaling::original_max_position_embeddings)
      .def_readwrite("beta_fast", &RopeScaling::beta_fast)
      .def_readwrite("beta_slow", &RopeScaling::beta_slow)
      .def_readwrite("mscale", &RopeScaling::mscale)
      .def_readwrite("mscale_all_dim", &RopeScaling::mscale_all_dim);
  py::class_<ModelConfig>(m, "ModelConfig")
      .def(py::init<>())
#define MTPSERVE_FIELD(name) .def_readwrite(#name, &ModelConfig::name)
      MTPSERVE_FIELD(vocab_size) MTPSERVE_FIELD(hidden_size) MTPSERVE_FIELD(intermediate_size)
      MTPSERVE_FIELD(moe_intermediate_size) MTPSERVE_FIELD(num_hidden_layers) MTPSERVE_FIELD(num_nextn_predict_layers)
      MTPSERVE_FIELD(num_attention_heads) MTPSERVE_FIELD(q_lora_rank) MTPSERVE_FIELD(kv_lora_rank)
      MTPSERVE_FIELD(qk_nope_head_dim) MTPSERVE_FIELD(qk_rope_head_dim) MTPSERVE_FIELD(v_head_dim)
      MTPSERVE_FIELD(n_routed_experts) MTPSERVE_FIELD(n_shared_experts) MTPSERVE_FIELD(num_experts_per_tok)
      MTPSERVE_FIELD(first_k_dense_replace) MTPSERVE_FIELD(moe_layer_freq) MTPSERVE_FIELD(n_group)
      MTPSERVE_FIELD(topk_group) MTPSERVE_FIELD(norm_topk_prob) MTPSERVE_FIELD(routed_scaling_factor)
      MTPSERVE_FIELD(rms_norm_eps) MTPSERVE_FIELD(rope_theta) MTPSERVE_FIELD(rope_scaling)
      MTPSERVE_FIELD(max_position_embeddings) MTPSERVE_FIELD(tie_word_embeddings) MTPSERVE_FIELD(batch_invariant)
#undef MTPSERVE_FIELD
      .def_property_readonly("cache_dim", &ModelConfig::cache_dim);
}

}  // namespace

void bind_model(py::module_& m) {
  bind_config(m);
  py::class_<TensorParallel>(m, "TensorParallel",
                             "This rank's place in a tensor-parallel c10d process group (default: one rank).")
      .def(py::init<>())
      .def_static("from_group_names", &TensorParallel::from_group_names, py::arg("data_group"),
                  py::arg("control_group"), py::arg("timeout_s"), py::arg("expert_group") = "",
                  "The torch.distributed groups registered under these names (ProcessGroup.group_name): the model's "
                  "collectives on `data_group` (this rank's attention group), step plans on `control_group` (gloo); "
                  "a peer may hang at most timeout_s. `expert_group` (empty: none): each of its ranks holds its share "
                  "of the routed experts whole and the all-to-alls run over it.")
      .def_property_readonly("rank", &TensorParallel::rank)
      .def_property_readonly("size", &TensorParallel::size)
      .def_property_readonly("expert_parallel", &TensorParallel::expert_parallel)
      .def_property_readonly("ep_rank", &TensorParallel::ep_rank)
      .def_property_readonly("ep_size", &TensorParallel::ep_size)
      .def(
          "all_reduce",
          [](const TensorParallel& tp, at::Tensor t) {
            tp.all_reduce(t);
            return t;
          },
          py::arg("t"), "Sums `t` over the ranks, in place (a no-op on one rank); returns it.",
          py::call_guard<py::gil_scoped_release>());
  m.def("tensor_parallel_dim", &tensor_parallel_dim, py::arg("name"),
        "The dimension tensor parallelism splits checkpoint tensor `name` along, or None.");
  m.def("stacked_gate_up", &stacked_gate_up, py::arg("prefix"),
        "Name of an MoE layer's stacked routed gate/up weights [experts, 2 * inter, hidden].");
  m.def("stacked_down", &stacked_down, py::arg("prefix"), "Name of an MoE layer's stacked down weights.");
  py::class_<DeepSeekV3>(m, "DeepSeekV3")
      .def(py::init([](const ModelConfig& c, TensorMap w, const TensorParallel& tp) {
             // Slicing and packing the weights is C++ work: other Python threads (the control
             // plane's heartbeats) keep running meanwhile. The caller's dict still owns the tensors.
             py::gil_scoped_release release;
             return DeepSeekV3(c, Weights(std::move(w)), tp);
           }),
           py::arg("config"), py::arg("weights"), py::arg("tp") = TensorParallel(),
           "With a tensor-parallel `tp`, a split tensor may be whole or already this rank's slice; the MoE "
           "layers' routed experts come stacked (stacked_gate_up / stacked_down).")
      .def_property_readonly("tp", &DeepSeekV3::tp)
      .def(
          "forward",
          [](const DeepSeekV3& model, const std::vector<at::Tensor>& caches, const at::Tensor& token_ids,
             const at::Tensor& positions, const std::vector<int64_t>& query_start, const std::vector<int64_t>& context_lens,
             const at::Tensor& block_tables, at::Tensor slot_mapping) {
            auto meta = metadata(query_start, context_lens, block_tables, std::move(slot_mapping));
            return model.forward(token_ids, positions, caches, meta);
          },
          py::arg("caches"), py::arg("token_ids"), py::arg("positions"), py::arg("query_start"),
          py::arg("context_lens"), py::arg("block_tables"), py::arg("slot_mapping"),
          py::call_guard<py::gil_scoped_release>())
      .def("logits", &DeepSeekV3::logits, py::call_guard<py::gil_scoped_release>());

  py::class_<MoE>(m, "MoE", "One MoE layer (router, routed and shared experts), for benchmarks and tests.")
      .def(py::init([](const ModelConfig& c, TensorMap w, const std::string& prefix, const TensorParallel& tp) {
             py::gil_scoped_release release;
             return MoE(c, Weights(std::move(w)), prefix, tp);
           }),
           py::arg("config"), py::arg("weights"), py::arg("prefix"), py::arg("tp") = TensorParallel(),
           "The layer under `prefix` (\"model.layers.N.mlp.\"); its routed experts come stacked.")
      .def("__call__", &MoE::operator(), py::arg("x"), py::call_guard<py::gil_scoped_release>(),
           "This rank's share of the output: the caller all-reduces it under tensor or expert parallelism.");

  py::class_<MtpLayer>(m, "MtpLayer")
      .def(py::init([](const ModelConfig& c, TensorMap w, int64_t layer, const DeepSeekV3& target) {
             py::gil_scoped_release release;
             return MtpLayer(c, Weights(std::move(w)), layer, target.embedding(), target.lm_head(), target.tp());
           }),
           py::arg("config"), py::arg("weights"), py::arg("layer"), py::arg("target"), py::keep_alive<1, 5>())
      .def(
          "forward",
          [](const MtpLayer& mtp, const DeepSeekV3& target, const at::Tensor& cache, const at::Tensor& token_ids,
             const at::Tensor& previous_hidden, const at::Tensor& positions, std::vector<int64_t> query_start,
             std::vector<int64_t> context_lens, at::Tensor block_tables, at::Tensor slot_mapping,
             const std::optional<std::vector<int64_t>>& outputs_per_seq) {
            auto meta = metadata(query_start, context_lens, block_tables, std::move(slot_mapping));
            if (!outputs_per_seq) return mtp.forward(token_ids, previous_hidden, positions, target.rope(), cache, meta);
            const auto [rows, starts] = last_rows(query_start, *outputs_per_seq);
            auto sampled = metadata(starts, context_lens, block_tables, {});
            const OutputRows out{at::tensor(rows, at::kLong).to(token_ids.device()), &sampled};
            return mtp.forward(token_ids, previous_hidden, positions, target.rope(), cache, meta, &out);
          },
          py::arg("target"), py::arg("cache"), py::arg("token_ids"), py::arg("previous_hidden"), py::arg("positions"),
          py::arg("query_start"), py::arg("context_lens"), py::arg("block_tables"), py::arg("slot_mapping"),
          py::arg("outputs_per_seq") = py::none(), py::call_guard<py::gil_scoped_release>(),
          "With outputs_per_seq, the output of each sequence's last n rows alone (the engine's MTP fill), "
          "every row still writing its cache row.")
      .def("logits", &MtpLayer::logits, py::call_guard<py::gil_scoped_release>());
}

}  // namespace mtpserve::bindings
