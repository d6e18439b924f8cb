// Core bindings: SamplingParams, Sequence, BlockManager and Scheduler, so Python (tests, and
// tools that inspect scheduling) can drive the torch-free core directly.
//
// Ownership: Python holds Sequences through shared_ptr. The Scheduler binding keeps a
// reference to every sequence it queued until finish(), so the raw pointers the C++
// Scheduler stores can never dangle, and it keeps its BlockManager alive.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <unordered_map>

#include "core/block_manager.h"
#include "core/sampling_params.h"
#include "core/scheduler.h"
#include "core/sequence.h"

namespace py = pybind11;

namespace mtpserve::bindings {

namespace {

using SequencePtr = std::shared_ptr<Sequence>;

struct PyScheduledSequence {
  SequencePtr seq;
  int64_t num_new_tokens;
  bool is_prefill;
  bool samples;
};

struct PySchedulerOutput {
  std::vector<PyScheduledSequence> scheduled;
  std::vector<SequencePtr> preempted;
};

// The C++ Scheduler plus the Python-side owners of the sequences it points at.
class PyScheduler {
 public:
  PyScheduler(SchedulerConfig config, BlockManager& blocks) : scheduler_(config, blocks) {}

  void add(const SequencePtr& seq) {
    scheduler_.add(seq.get());
    owned_[seq.get()] = seq;
  }

  PySchedulerOutput schedule() {
    SchedulerOutput out = scheduler_.schedule();
    PySchedulerOutput py_out;
    for (const ScheduledSequence& s : out.scheduled) {
      py_out.scheduled.push_back({owned_.at(s.seq), s.num_new_tokens, s.is_prefill, s.samples});
    }
    for (Sequence* seq : out.preempted) py_out.preempted.push_back(owned_.at(seq));
    return py_out;
  }

  void finish(const SequencePtr& seq, FinishReason reason) {
    scheduler_.finish(seq.get(), reason);
    owned_.erase(seq.get());
  }

  const Scheduler& get() const { return scheduler_; }

 private:
  Scheduler scheduler_;
  std::unordered_map<Sequence*, SequencePtr> owned_;
};

void bind_enums(py::module_& m) {
  py::enum_<SequenceStatus>(m, "SequenceStatus")
      .value("WAITING", SequenceStatus::kWaiting)
      .value("RUNNING", SequenceStatus::kRunning)
      .value("FINISHED", SequenceStatus::kFinished);
  py::enum_<FinishReason>(m, "FinishReason")
      .value("NONE", FinishReason::kNone)
      .value("STOP", FinishReason::kStop)
      .value("LENGTH", FinishReason::kLength)
      .value("ABORT", FinishReason::kAbort);
}

void bind_sampling_params(py::module_& m) {
  py::class_<SamplingParams>(m, "SamplingParams")
      // Validated on construction, as vLLM's is; call validate() again after editing fields.
      .def(py::init([](double temperature, double top_p, int64_t top_k, double min_p, std::optional<uint64_t> seed,
                       double presence_penalty, double frequency_penalty, int64_t max_tokens,
                       std::vector<int64_t> stop_token_ids, bool ignore_eos, int64_t logprobs) {
             SamplingParams p{temperature, top_p, top_k, min_p, seed, presence_penalty, frequency_penalty,
                              max_tokens, std::move(stop_token_ids), ignore_eos, logprobs};
             p.validate();
             return p;
           }),
           py::kw_only(), py::arg("temperature") = 1.0, py::arg("top_p") = 1.0, py::arg("top_k") = 0,
           py::arg("min_p") = 0.0, py::arg("seed") = py::none(), py::arg("presence_penalty") = 0.0,
           py::arg("frequency_penalty") = 0.0, py::arg("max_tokens") = 16,
           py::arg("stop_token_ids") = std::vector<int64_t>{}, py::arg("ignore_eos") = false,
           py::arg("logprobs") = -1)
#define MTPSERVE_FIELD(name) .def_readwrite(#name, &SamplingParams::name)
      MTPSERVE_FIELD(temperature) MTPSERVE_FIELD(top_p) MTPSERVE_FIELD(top_k) MTPSERVE_FIELD(min_p)
      MTPSERVE_FIELD(seed) MTPSERVE_FIELD(presence_penalty) MTPSERVE_FIELD(frequency_penalty)
      MTPSERVE_FIELD(max_tokens) MTPSERVE_FIELD(stop_token_ids) MTPSERVE_FIELD(ignore_eos) MTPSERVE_FIELD(logprobs)
      MTPSERVE_FIELD(repetition_penalty) MTPSERVE_FIELD(logit_bias) MTPSERVE_FIELD(min_tokens)
      MTPSERVE_FIELD(prompt_logprobs) MTPSERVE_FIELD(constraint)
#undef MTPSERVE_FIELD
      .def("validate", &SamplingParams::validate)
      .def_property_readonly("greedy", &SamplingParams::greedy);
}

void bind_sequence(py::module_& m) {
  py::class_<Sequence, SequencePtr>(m, "Sequence")
      .def(py::init<int64_t, std::vector<int64_t>, SamplingParams>(), py::arg("id"), py::arg("prompt_token_ids"),
           py::arg("params") = SamplingParams{})
      .def_readonly("id", &Sequence::id)
      .def_readonly("tokens", &Sequence::tokens)
      .def_readonly("num_prompt_tokens", &Sequence::num_prompt_tokens)
      .def_readwrite("num_computed_tokens", &Sequence::num_computed_tokens)
      .def_readonly("num_cached_tokens", &Sequence::num_cached_tokens)
      .def_readonly("block_table", &Sequence::block_table)
      .def_readonly("params", &Sequence::params)
      .def_readonly("status", &Sequence::status)
      .def_readonly("finish_reason", &Sequence::finish_reason)
      .def_readwrite("draft_tokens", &Sequence::draft_tokens)
      .def_readwrite("drafts", &Sequence::drafts)
      .def_property_readonly("num_tokens", &Sequence::num_tokens)
      .def_property_readonly("num_output_tokens", &Sequence::num_output_tokens)
      .def_property_readonly("last_token", &Sequence::last_token)
      .def_property_readonly("is_prefill", &Sequence::is_prefill)
      .def_property_readonly("is_finished", &Sequence::is_finished)
      .def("append_token", &Sequence::append_token, py::arg("token"))
      .def("__repr__", [](const Sequence& s) {
        return "Sequence(id=" + std::to_string(s.id) + ", num_tokens=" + std::to_string(s.num_tokens()) +
               ", num_computed_tokens=" + std::to_string(s.num_computed_tokens) +
               ", blocks=" + std::to_string(s.block_table.size()) + ")";
      });
}

void bind_block_manager(py::module_& m) {
  py::class_<BlockManager>(m, "BlockManager")
      .def(py::init<int64_t, int64_t, bool>(), py::arg("num_blocks"), py::arg("block_size"),
           py::arg("enable_prefix_cache") = true)
      .def("allocate_prompt", &BlockManager::allocate_prompt, py::arg("seq"))
      .def("match_prefix", &BlockManager::match_prefix, py::arg("seq"))
      .def("can_allocate_prompt", &BlockManager::can_allocate_prompt, py::arg("seq"), py::arg("num_new_tokens"))
      .def("can_reserve", &BlockManager::can_reserve, py::arg("seq"), py::arg("num_new_tokens"))
      .def("reserve", &BlockManager::reserve, py::arg("seq"), py::arg("num_new_tokens"))
      .def("commit", &BlockManager::commit, py::arg("seq"),
           py::arg("complete") = std::numeric_limits<int64_t>::max())
      .def("free", &BlockManager::free, py::arg("seq"))
      .def("ref_count", &BlockManager::ref_count, py::arg("block"))
      .def("num_blocks_for", &BlockManager::num_blocks_for, py::arg("num_tokens"))
      .def("set_draft_layer", &BlockManager::set_draft_layer, py::arg("on"))
      .def("set_hash_mask_for_testing", &BlockManager::set_hash_mask_for_testing, py::arg("mask"))
      .def_property_readonly("num_blocks", &BlockManager::num_blocks)
      .def_property_readonly("block_size", &BlockManager::block_size)
      .def_property_readonly("prefix_cache_enabled", &BlockManager::prefix_cache_enabled)
      .def_property_readonly("num_free_blocks", &BlockManager::num_free_blocks)
      .def_property_readonly("num_cached_blocks", &BlockManager::num_cached_blocks)
      .def_property_readonly("usage", &BlockManager::usage)
      .def_property_readonly("prefix_cache_queries", &BlockManager::prefix_cache_queries)
      .def_property_readonly("prefix_cache_hits", &BlockManager::prefix_cache_hits);
}

void bind_scheduler(py::module_& m) {
  py::class_<SchedulerConfig>(m, "SchedulerConfig")
      .def(py::init([](int64_t max_tokens_per_batch, int64_t max_seqs_per_batch, bool enable_chunked_prefill,
                       int64_t num_speculative_tokens) {
             SchedulerConfig c{max_tokens_per_batch, max_seqs_per_batch, enable_chunked_prefill,
                               num_speculative_tokens};
             c.validate();
             return c;
           }),
           py::kw_only(), py::arg("max_tokens_per_batch") = 10240, py::arg("max_seqs_per_batch") = 256,
           py::arg("enable_chunked_prefill") = true, py::arg("num_speculative_tokens") = 0)
      .def_readwrite("max_tokens_per_batch", &SchedulerConfig::max_tokens_per_batch)
      .def_readwrite("max_seqs_per_batch", &SchedulerConfig::max_seqs_per_batch)
      .def_readwrite("enable_chunked_prefill", &SchedulerConfig::enable_chunked_prefill)
      .def_readwrite("num_speculative_tokens", &SchedulerConfig::num_speculative_tokens);

  py::class_<PyScheduledSequence>(m, "ScheduledSequence")
      .def_readonly("seq", &PyScheduledSequence::seq)
      .def_readonly("num_new_tokens", &PyScheduledSequence::num_new_tokens)
      .def_readonly("is_prefill", &PyScheduledSequence::is_prefill)
      .def_readonly("samples", &PyScheduledSequence::samples)
      .def_property_readonly("seq_id", [](const PyScheduledSequence& s) { return s.seq->id; });

  py::class_<PySchedulerOutput>(m, "SchedulerOutput")
      .def_readonly("scheduled", &PySchedulerOutput::scheduled)
      .def_readonly("preempted", &PySchedulerOutput::preempted)
      .def_property_readonly("empty", [](const PySchedulerOutput& o) { return o.scheduled.empty(); })
      .def_property_readonly("num_tokens", [](const PySchedulerOutput& o) {
        int64_t total = 0;
        for (const auto& s : o.scheduled) total += s.num_new_tokens;
        return total;
      });

  py::class_<PyScheduler>(m, "Scheduler")
      .def(py::init<SchedulerConfig, BlockManager&>(), py::arg("config"), py::arg("block_manager"),
           py::keep_alive<1, 3>())
      .def("add", &PyScheduler::add, py::arg("seq"))
      .def("schedule", &PyScheduler::schedule)
      .def("finish", &PyScheduler::finish, py::arg("seq"), py::arg("reason"))
      .def_property_readonly("has_unfinished", [](const PyScheduler& s) { return s.get().has_unfinished(); })
      .def_property_readonly("num_waiting", [](const PyScheduler& s) { return s.get().num_waiting(); })
      .def_property_readonly("num_running", [](const PyScheduler& s) { return s.get().num_running(); })
      .def_property_readonly("config", [](const PyScheduler& s) { return s.get().config(); });
}

}  // namespace

void bind_core(py::module_& m) {
  bind_enums(m);
  bind_sampling_params(m);
  bind_sequence(m);
  bind_block_manager(m);
  bind_scheduler(m);
}

}  // namespace mtpserve::bindings
