// The engine's outputs reach Python as struct sequences (the C API's named tuples, like os.stat_result): built here
// without calling into Python and read by attribute at C speed. Between processes (the engine's one output thread and
// its API servers) they travel as plain tuples in the same field order, which pickle fastest; the receiving side
// turns them back into the same structs here. Every reader of outputs thus sees one type, and reads it for less than
// the bound C++ objects and the named tuples made in Python that it replaces: on a 2-core VM, 8-10 against 13-16 us
// of CPU an output taken and read in one process, 2-3 against 3-4 us unpickled and read in another (docs/benchmarks.md,
// fifty-second session).
#include "bindings/output_structs.h"

#include <pybind11/stl.h>

namespace py = pybind11;

namespace mtpserve::bindings {

namespace {

PyStructSequence_Field kTokenLogprobsFields[] = {
    {"token", "the token id"},
    {"logprob", "its log-probability"},
    {"rank", "its rank in the distribution, 1 = most likely"},
    {"top", "the most likely (token, logprob) pairs asked for"},
    {nullptr, nullptr}};
PyStructSequence_Field kSpecCountersFields[] = {
    {"drafts", "verify steps that carried drafts"},
    {"draft_tokens", "drafts proposed"},
    {"accepted_tokens", "drafts accepted"},
    {"accepted_per_position", "[i]: drafts accepted at position i + 1"},
    {"steps_by_k", "[k]: decode steps that verified k drafts"},
    {"retired", "times retired from drafting (engine-wide: sequences retired)"},
    {nullptr, nullptr}};
PyStructSequence_Field kRequestOutputFields[] = {
    {"request_id", nullptr},
    {"token_ids", "the tokens added since the request's last output"},
    {"logprobs", "a TokenLogprobs per new token, when logprobs were asked for"},
    {"prompt_logprobs", "with the first output, when asked for: a TokenLogprobs per prompt token but the first"},
    {"finished", nullptr},
    {"finish_reason", "stop, length, abort or error once finished"},
    {"stop_token", "the stop token id that ended it, or None"},
    {"error", nullptr},
    {"num_prompt_tokens", nullptr},
    {"num_cached_tokens", "prompt tokens served by the prefix cache"},
    {"spec", "the request's SpecCounters, cumulative"},
    {nullptr, nullptr}};

constexpr int kLogprobs = 2, kPromptLogprobs = 3, kSpec = 10;  // RequestOutput's fields that hold structs

PyStructSequence_Desc kTokenLogprobs{"mtpserve._C.TokenLogprobs", "A sampled token's log-probability.",
                                     kTokenLogprobsFields, 4};
PyStructSequence_Desc kSpecCounters{"mtpserve._C.SpecCounters", "Speculative-decoding counters.", kSpecCountersFields,
                                    6};
PyStructSequence_Desc kRequestOutput{"mtpserve._C.RequestOutput", "What the engine streams back for a request.",
                                     kRequestOutputFields, 11};

// Created once, with the module, and kept for the life of the process.
PyTypeObject* g_token_logprobs = nullptr;
PyTypeObject* g_spec_counters = nullptr;
PyTypeObject* g_request_output = nullptr;

// A struct of `type` whose i-th field is field(i), for i < size.
template <class Field>
py::object make(PyTypeObject* type, size_t size, const Field& field) {
  auto made = py::reinterpret_steal<py::object>(PyStructSequence_New(type));
  if (!made) throw py::error_already_set();
  for (size_t i = 0; i < size; ++i) {
    PyStructSequence_SetItem(made.ptr(), static_cast<Py_ssize_t>(i), field(i).release().ptr());  // steals it
  }
  return made;
}

py::object make(PyTypeObject* type, const py::tuple& fields) {
  return make(type, fields.size(), [&](size_t i) { return py::object(fields[i]); });
}

py::list logprobs_states(const std::vector<TokenLogprobs>& entries) {
  py::list states(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    const TokenLogprobs& t = entries[i];
    states[i] = py::make_tuple(t.token, t.logprob, t.rank, t.top);
  }
  return states;
}

py::tuple spec_state(const SpecCounters& c) {
  return py::make_tuple(c.drafts, c.draft_tokens, c.accepted_tokens, c.accepted_per_position, c.steps_by_k,
                        c.retired);
}

py::tuple output_state(const RequestOutput& o) {
  return py::make_tuple(o.request_id, o.token_ids, logprobs_states(o.logprobs), logprobs_states(o.prompt_logprobs),
                        o.finished, o.finish_reason, o.stop_token, o.error, o.num_prompt_tokens, o.num_cached_tokens,
                        spec_state(o.spec));
}

py::list logprobs_structs(const py::list& states) {
  py::list structs(states.size());
  for (size_t i = 0; i < states.size(); ++i) structs[i] = make(g_token_logprobs, states[i]);
  return structs;
}

// A struct from its state: the same fields, the nested ones structs too.
py::object output_struct(const py::tuple& state) {
  return make(g_request_output, state.size(), [&](size_t i) -> py::object {
    if (i == kLogprobs || i == kPromptLogprobs) return logprobs_structs(state[i]);
    if (i == kSpec) return make(g_spec_counters, state[i]);
    return state[i];
  });
}

PyTypeObject* add_type(py::module_& m, PyStructSequence_Desc* desc, const char* name) {
  PyTypeObject* type = PyStructSequence_NewType(desc);
  if (type == nullptr) throw py::error_already_set();
  m.attr(name) = py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(type));
  return type;
}

}  // namespace

void bind_output_structs(py::module_& m) {
  g_token_logprobs = add_type(m, &kTokenLogprobs, "TokenLogprobs");
  g_spec_counters = add_type(m, &kSpecCounters, "SpecCounters");
  g_request_output = add_type(m, &kRequestOutput, "RequestOutput");
}

py::object spec_struct(const SpecCounters& spec) { return make(g_spec_counters, spec_state(spec)); }

py::list output_states(const std::vector<RequestOutput>& outputs) {
  py::list states(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) states[i] = output_state(outputs[i]);
  return states;
}

py::list output_structs(const std::vector<RequestOutput>& outputs) {
  py::list structs(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) structs[i] = output_struct(output_state(outputs[i]));
  return structs;
}

py::list structs_from_states(const py::list& states) {
  py::list structs(states.size());
  for (size_t i = 0; i < states.size(); ++i) structs[i] = output_struct(states[i]);
  return structs;
}

}  // namespace mtpserve::bindings
