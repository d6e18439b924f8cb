// Engine bindings: a thread-safe engine running its loop in C++; Python submits, aborts and
// collects outputs with the GIL released.
#include <pybind11/stl.h>
#include <torch/extension.h>

#include <optional>

#include "bindings/output_structs.h"
#include "engine/engine.h"
#include "engine/step_input.h"
#include "engine/worker.h"
#include "kernels/row_buckets.h"

namespace py = pybind11;

namespace mtpserve::bindings {

namespace {

// Engine::get_outputs with the GIL released while it waits, the outputs then made Python objects by `as`.
template <py::list (*as)(const std::vector<RequestOutput>&)>
py::list get_outputs(Engine& engine, double timeout_s) {
  std::vector<RequestOutput> outputs;
  {
    py::gil_scoped_release release;
    outputs = engine.get_outputs(timeout_s);
  }
  return as(outputs);
}

void bind_outputs(py::module_& m) {
  bind_output_structs(m);
  m.def("request_outputs", &structs_from_states, py::arg("states"),
        "Engine.get_output_states' tuples as the RequestOutputs that get_outputs would have given.");
  py::class_<EngineStats>(m, "EngineStats")
      .def_readonly("running", &EngineStats::running)
      .def_readonly("waiting", &EngineStats::waiting)
      .def_readonly("kv_usage", &EngineStats::kv_usage)
      .def_readonly("prefix_queries", &EngineStats::prefix_queries)
      .def_readonly("prefix_hits", &EngineStats::prefix_hits)
      .def_readonly("prompt_tokens", &EngineStats::prompt_tokens)
      .def_readonly("generation_tokens", &EngineStats::generation_tokens)
      .def_readonly("steps", &EngineStats::steps)
      .def_readonly("preemptions", &EngineStats::preemptions)
      .def_readonly("target_seconds", &EngineStats::target_seconds)
      .def_readonly("sample_seconds", &EngineStats::sample_seconds)
      .def_readonly("draft_seconds", &EngineStats::draft_seconds)
      .def_readonly("draft_host_seconds", &EngineStats::draft_host_seconds)
      .def_readonly("plan_seconds", &EngineStats::plan_seconds)
      .def_readonly("step_seconds", &EngineStats::step_seconds)
      .def_readonly("prompt_step_seconds", &EngineStats::prompt_step_seconds)
      .def_readonly("prompt_steps", &EngineStats::prompt_steps)
      .def_readonly("fill_skipped_steps", &EngineStats::fill_skipped_steps)
      .def_readonly("caught_up_positions", &EngineStats::caught_up_positions)
      .def_readonly("dropped_positions", &EngineStats::dropped_positions)
      .def_property_readonly("spec", [](const EngineStats& stats) { return spec_struct(stats.spec); });
}

// The speculation policy on its own, fed made-up timings and verifications (tests).
void bind_policy(py::module_& m) {
  py::class_<SpeculationPolicy>(m, "SpeculationPolicy")
      .def(py::init<SpeculationPolicyKind, int64_t, int64_t>(), py::arg("kind"), py::arg("k_max"),
           py::arg("fill_every") = 1)
      .def_property_readonly_static("warmup_rounds", [](py::object) { return SpeculationPolicy::kWarmupRounds; })
      .def_property_readonly_static("probe_interval", [](py::object) { return SpeculationPolicy::kProbeInterval; })
      .def_property_readonly_static("probe_budget", [](py::object) { return SpeculationPolicy::kProbeBudget; })
      .def_property_readonly_static("retire_streak", [](py::object) { return SpeculationPolicy::kRetireStreak; })
      .def_property_readonly_static("class_trust", [](py::object) { return AcceptanceStats::kClassTrust; })
      .def(
          "plan",
          [](SpeculationPolicy& p, const std::vector<py::tuple>& candidates, int64_t retired_seqs,
             int64_t retired_context, std::optional<double> retired_inverse_outputs) {
            std::vector<DraftCandidate> c;
            for (const auto& t : candidates) {
              c.push_back({t[0].cast<int64_t>(), t[1].cast<int64_t>(), t[2].cast<int64_t>(), t[3].cast<bool>(),
                           t[4].cast<int64_t>(), t.size() > 5 ? t[5].cast<int64_t>() : -1,
                           t.size() > 6 ? t[6].cast<int64_t>() : 1});
            }
            const DraftPlan plan = p.plan(
                c, {retired_seqs, retired_context, retired_inverse_outputs.value_or(static_cast<double>(retired_seqs))});
            return std::make_tuple(plan.step_k, plan.drafts, plan.retire, plan.drop, plan.defer);
          },
          py::arg("candidates"), py::arg("retired_seqs") = 0, py::arg("retired_context") = 0,
          py::arg("retired_inverse_outputs") = py::none(),
          "candidates: (seq_id, budget, context, pinned, stashed positions[, sampling class[, output tokens]]) each "
          "(output tokens 1 unless given: equal weights), beside retired_seqs retired sequences (1 / their output "
          "tokens summed: retired_inverse_outputs, else 1 each); returns (step k, drafts of each, retired or not "
          "each, waiting positions dropped or not each, fill deferred or not each)")
      .def("force_schedule", &SpeculationPolicy::force_schedule, py::arg("schedule"),
           py::arg("unpaid") = std::vector<bool>{})
      .def("record_verify",
           [](SpeculationPolicy& p, int64_t num_seqs, int64_t step_k, int64_t rows, int64_t context, double seconds) {
             p.costs().record_verify(num_seqs, step_k, rows, context, seconds);
           })
      .def("record_draft",
           [](SpeculationPolicy& p, int64_t num_seqs, int64_t fill_rows, int64_t recursions, int64_t recursion_rows,
              double seconds) { p.costs().record_draft(num_seqs, fill_rows, recursions, recursion_rows, seconds); })
      .def("verify_seconds",
           [](SpeculationPolicy& p, int64_t num_seqs, int64_t step_k, double rows, double context) {
             return p.costs().verify_seconds(num_seqs, step_k, rows, context);
           })
      .def("draft_seconds",
           [](SpeculationPolicy& p, int64_t num_seqs, double fill_rows, int64_t recursions, double recursion_rows) {
             return p.costs().draft_seconds(num_seqs, fill_rows, static_cast<double>(recursions), recursion_rows);
           })
      .def("record_acceptance", [](SpeculationPolicy& p, int64_t seq_id, int64_t drafts,
                                   int64_t accepted) { p.acceptance().record(seq_id, drafts, accepted); })
      .def("engine_acceptance", [](SpeculationPolicy& p) { return p.acceptance().engine(); })
      .def("sequence_acceptance",
           [](SpeculationPolicy& p, int64_t seq_id) { return p.acceptance().sequence(seq_id); })
      .def("vouched_for", [](SpeculationPolicy& p, int64_t seq_id) { return p.acceptance().vouched_for(seq_id); });
}

// One prompt through the engine's forwards (tests): its greedy first token after the prefill, then
// the k drafts the MtpDrafter proposes from there (the MTP fill, then the recursion).
std::pair<int64_t, std::vector<int64_t>> drafts_after_prefill(const DeepSeekV3& target, std::vector<at::Tensor> caches,
                                                               const MtpLayer& mtp, at::Tensor mtp_cache,
                                                               int64_t block_size, std::vector<int64_t> prompt,
                                                               int64_t k) {
  ModelRunner runner(target, std::move(caches), &mtp, std::move(mtp_cache));
  Sequence seq(0, std::move(prompt));
  const int64_t n = seq.num_tokens();
  for (int32_t block = 0; block * block_size < n + k + 1; ++block) seq.block_table.push_back(block);
  const StepInput input = build_step_input({{&seq, n, true, true}}, block_size);
  const int64_t first = runner.run_target(input).argmax(-1).item<int64_t>();
  seq.num_computed_tokens = n;
  seq.append_token(first);
  MtpDrafter(runner, block_size).propose({{&seq, 0, n, 0, k}});
  return {first, seq.draft_tokens};
}

// A step built as a GPU builds one that fits no graph (padded by kernels::round_up_rows), from sequences given
// as (rows, sampled rows, blocks in its table) at position 0 (tests): its layout, as the device reads it.
py::dict padded_step(int64_t block_size, const std::vector<std::tuple<int64_t, int64_t, int64_t>>& sequences) {
  std::vector<std::vector<int32_t>> tables;
  for (size_t i = 0; i < sequences.size(); ++i) {
    tables.emplace_back(std::get<2>(sequences[i]), static_cast<int32_t>(i + 1));
  }
  StepBuilder builder(block_size, std::nullopt, kernels::round_up_rows);
  for (size_t i = 0; i < sequences.size(); ++i) {
    const std::vector<int64_t> tokens(std::get<0>(sequences[i]), 7);
    builder.add(tables[i], 0, tokens, std::get<1>(sequences[i]));
  }
  const StepInput input = builder.build();
  const auto list = [](const at::Tensor& t) {
    const auto flat = t.to(at::kLong).reshape({-1});
    return std::vector<int64_t>(flat.data_ptr<int64_t>(), flat.data_ptr<int64_t>() + flat.numel());
  };
  const DeviceStep step = device_steps(upload({&input, 1}, at::kCPU), {&input, 1})[0];  // the engine's own reading
  py::dict out;
  out["rows"] = step.token_ids.size(0);
  out["sampled_rows"] = input.sampled_rows();
  out["table_width"] = step.attention.block_tables.size(1);
  out["slots"] = list(step.attention.slot_mapping);
  out["block_tables"] = list(step.attention.block_tables);
  out["query_start"] = input.query_start;
  out["context_lens"] = list(step.attention.context_lens);
  out["num_samples"] = input.num_samples;
  out["sample_rows"] = list(step.sample_rows);
  out["sampled_query_start"] = list(step.sampled_attention.query_start);
  out["sampled_context_lens"] = list(step.sampled_attention.context_lens);
  out["sampled_max_query_len"] = step.sampled_attention.max_query_len;
  return out;
}

// Deleting an engine joins its thread, which may be waiting for the GIL (a grammar's token masker
// runs Python): the GIL is released while it joins.
struct DeleteWithoutGil {
  void operator()(Engine* engine) const {
    py::gil_scoped_release no_gil;
    delete engine;
  }
};
using EngineHolder = std::unique_ptr<Engine, DeleteWithoutGil>;

}  // namespace

void bind_engine(py::module_& m) {
  bind_policy(m);
  m.def("drafts_after_prefill", &drafts_after_prefill, py::arg("target"), py::arg("caches"), py::arg("mtp"),
        py::arg("mtp_cache"), py::arg("block_size"), py::arg("prompt"), py::arg("k"),
        "Tests: (greedy first token, the k MTP drafts that follow it) for one prompt, through the engine's forwards.");
  m.def("padded_step", &padded_step, py::arg("block_size"), py::arg("sequences"),
        "Tests: the layout of a step that fits no graph, padded as on a GPU; sequences: (rows, sampled rows, "
        "table blocks) each.");
  bind_outputs(m);
  py::enum_<SpeculationPolicyKind>(m, "SpeculationPolicyKind")
      .value("adaptive", SpeculationPolicyKind::kAdaptive)
      .value("fixed", SpeculationPolicyKind::kFixed);
  py::class_<StepLockstep, std::shared_ptr<StepLockstep>>(
      m, "StepLockstep",
      "Data-parallel attention with expert parallelism: the attention groups' engines agree on every step.")
      .def_static("from_group_name", &StepLockstep::from_group_name, py::arg("leaders_group"), py::arg("timeout_s"),
                  "The gloo group of the groups' leaders, registered under this name (ProcessGroup.group_name).")
      .def_property_readonly("group", &StepLockstep::group)
      .def_property_readonly("groups", &StepLockstep::groups);
  py::class_<EngineConfig>(m, "EngineConfig")
      .def(py::init<>())
      .def_readwrite("block_size", &EngineConfig::block_size)
      .def_readwrite("num_blocks", &EngineConfig::num_blocks)
      .def_readwrite("enable_prefix_cache", &EngineConfig::enable_prefix_cache)
      .def_readwrite("scheduler", &EngineConfig::scheduler)
      .def_readwrite("max_model_len", &EngineConfig::max_model_len)
      .def_readwrite("eos_token_ids", &EngineConfig::eos_token_ids)
      .def_readwrite("seed", &EngineConfig::seed)
      .def_readwrite("num_speculative_tokens", &EngineConfig::num_speculative_tokens)
      .def_readwrite("enable_graph", &EngineConfig::enable_graph)
      .def_readwrite("graph_max_batch", &EngineConfig::graph_max_batch)
      .def_readwrite("enable_prefill_graph", &EngineConfig::enable_prefill_graph)
      .def_readwrite("speculative_policy", &EngineConfig::speculative_policy)
      .def_readwrite("deferred_fill_positions", &EngineConfig::deferred_fill_positions)
      .def_readwrite("plan_ahead", &EngineConfig::plan_ahead)
      .def_readwrite("token_masker", &EngineConfig::token_masker)
      .def_readwrite("lockstep", &EngineConfig::lockstep);
  py::class_<Engine, EngineHolder>(m, "Engine")
      .def(py::init([](EngineConfig config, const DeepSeekV3& target, std::vector<at::Tensor> caches,
                       const MtpLayer* mtp, std::optional<at::Tensor> mtp_cache) {
             return EngineHolder(new Engine(std::move(config), target, std::move(caches), mtp,
                                            mtp_cache.value_or(at::Tensor())));
           }),
           py::arg("config"), py::arg("target"), py::arg("caches"), py::arg("mtp") = nullptr,
           py::arg("mtp_cache") = std::nullopt, py::keep_alive<1, 3>(), py::keep_alive<1, 5>())
      .def("add_request", &Engine::add_request, py::arg("request_id"), py::arg("prompt_token_ids"),
           py::arg("params"))
      .def(
          "add_requests",
          [](Engine& engine, std::vector<std::tuple<std::string, std::vector<int64_t>, SamplingParams>> batch) {
            std::vector<Engine::NewRequest> requests;
            for (auto& [id, prompt, params] : batch) requests.push_back({id, std::move(prompt), std::move(params)});
            engine.add_requests(std::move(requests));
          },
          py::arg("requests"),
          "(request_id, prompt_token_ids, params) each: all are checked before any is queued, and the next step "
          "sees them all.")
      .def("abort", &Engine::abort, py::arg("request_id"))
      .def("override_drafts", &Engine::override_drafts, py::arg("request_id"), py::arg("future_outputs"),
           "Tests only: draft future_outputs[n:n+k] at output index n instead of the MTP layer's argmax.")
      .def("inject_fault_after", &Engine::inject_fault_after, py::arg("steps"),
           "Tests only: after `steps` more steps, the next one throws midway, as a failing kernel would.")
      .def("force_k_schedule", &Engine::force_k_schedule, py::arg("schedule"), py::arg("unpaid") = std::vector<bool>{},
           "Tests only: the i-th drafting step takes k = schedule[i % len(schedule)], whatever the policy, and "
           "drops its sequences' waiting MTP fills instead of catching them up where unpaid[i % len(unpaid)].")
      .def("get_outputs", &get_outputs<output_structs>, py::arg("timeout_s"),
           "The outputs published since the last call (RequestOutput each), waiting up to timeout_s for one.")
      .def("get_output_states", &get_outputs<output_states>, py::arg("timeout_s"),
           "get_outputs as plain tuples, to pickle for another process, where request_outputs reads them.")
      .def("stats", &Engine::stats)
      .def("num_graphs", &Engine::num_graphs, "Graphs captured so far (0 where the device has none): the decode graphs of start-up, and the piecewise "
           "graphs of steps with prompt tokens that the engine thread records as their row counts come (read it "
           "while no step runs).")
      .def("fail", &Engine::fail, py::arg("reason"),
           "Marks the engine failed (a rank died): open requests end with `reason`, new ones are refused.")
      .def("error", &Engine::error, "Why the engine failed, or None.")
      .def("shutdown", &Engine::shutdown, py::call_guard<py::gil_scoped_release>());
  py::class_<Worker>(m, "Worker", "Tensor-parallel ranks 1..N-1: runs the forwards rank 0's Engine announces.")
      .def(py::init([](const DeepSeekV3& target, std::vector<at::Tensor> caches, const MtpLayer* mtp,
                       std::optional<at::Tensor> mtp_cache) {
             return std::make_unique<Worker>(target, std::move(caches), mtp, mtp_cache.value_or(at::Tensor()));
           }),
           py::arg("target"), py::arg("caches"), py::arg("mtp") = nullptr, py::arg("mtp_cache") = std::nullopt,
           py::keep_alive<1, 2>(), py::keep_alive<1, 4>())
      .def("run", &Worker::run, py::call_guard<py::gil_scoped_release>(),
           "Blocks until rank 0 shuts the group down; raises when a collective fails.")
      .def_property_readonly("steps", &Worker::steps);
}

}  // namespace mtpserve::bindings
