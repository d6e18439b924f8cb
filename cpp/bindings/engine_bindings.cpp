// Engine bindings: a thread-safe engine running its loop in C++; Python submits, aborts and
// collects outputs with the GIL released.
#include <pybind11/stl.h>
#include <torch/extension.h>

#include "engine/engine.h"
#include "engine/worker.h"

namespace py = pybind11;

namespace mtpserve::bindings {

namespace {

void bind_outputs(py::module_& m) {
  py::class_<TokenLogprobs>(m, "TokenLogprobs")
      .def_readonly("token", &TokenLogprobs::token)
      .def_readonly("logprob", &TokenLogprobs::logprob)
      .def_readonly("rank", &TokenLogprobs::rank)
      .def_readonly("top", &TokenLogprobs::top);
  py::class_<SpecCounters>(m, "SpecCounters")
      .def_readonly("drafts", &SpecCounters::drafts)
      .def_readonly("draft_tokens", &SpecCounters::draft_tokens)
      .def_readonly("accepted_tokens", &SpecCounters::accepted_tokens)
      .def_readonly("accepted_per_position", &SpecCounters::accepted_per_position);
  py::class_<RequestOutput>(m, "RequestOutput")
      .def_readonly("request_id", &RequestOutput::request_id)
      .def_readonly("token_ids", &RequestOutput::token_ids)
      .def_readonly("logprobs", &RequestOutput::logprobs)
      .def_readonly("prompt_logprobs", &RequestOutput::prompt_logprobs)
      .def_readonly("finished", &RequestOutput::finished)
      .def_readonly("finish_reason", &RequestOutput::finish_reason)
      .def_readonly("stop_token", &RequestOutput::stop_token)
      .def_readonly("error", &RequestOutput::error)
      .def_readonly("num_prompt_tokens", &RequestOutput::num_prompt_tokens)
      .def_readonly("num_cached_tokens", &RequestOutput::num_cached_tokens)
      .def_readonly("spec", &RequestOutput::spec);
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
      .def_readonly("spec", &EngineStats::spec);
}

}  // namespace

void bind_engine(py::module_& m) {
  bind_outputs(m);
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
      .def_readwrite("graph_max_batch", &EngineConfig::graph_max_batch);
  py::class_<Engine>(m, "Engine")
      .def(py::init([](EngineConfig config, const DeepSeekV3& target, std::vector<at::Tensor> caches,
                       const MtpLayer* mtp, std::optional<at::Tensor> mtp_cache) {
             return std::make_unique<Engine>(std::move(config), target, std::move(caches), mtp,
                                             mtp_cache.value_or(at::Tensor()));
           }),
           py::arg("config"), py::arg("target"), py::arg("caches"), py::arg("mtp") = nullptr,
           py::arg("mtp_cache") = std::nullopt, py::keep_alive<1, 3>(), py::keep_alive<1, 5>())
      .def("add_request", &Engine::add_request, py::arg("request_id"), py::arg("prompt_token_ids"),
           py::arg("params"))
      .def("abort", &Engine::abort, py::arg("request_id"))
      .def("override_drafts", &Engine::override_drafts, py::arg("request_id"), py::arg("future_outputs"),
           "Tests only: draft future_outputs[n:n+k] at output index n instead of the MTP layer's argmax.")
      .def("inject_fault_after", &Engine::inject_fault_after, py::arg("steps"),
           "Tests only: after `steps` more steps, the next one throws midway, as a failing kernel would.")
      .def("get_outputs", &Engine::get_outputs, py::arg("timeout_s"), py::call_guard<py::gil_scoped_release>())
      .def("stats", &Engine::stats)
      .def("num_graphs", &Engine::num_graphs, "Graphs captured at start-up (0 where the device has none).")
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
