// Grammar bindings (core/token_constraint.h): the grammar library lives in Python. A request's
// TokenConstraint holds any Python object as its state, and the engine's TokenMasker calls one Python
// function per step with every constrained request of the step, so the engine thread takes the GIL
// once per such step, never per request or per row.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

#include "core/token_constraint.h"

namespace py = pybind11;

namespace mtpserve::bindings {

namespace {

// Drops a Python reference from whichever thread holds the last C++ one (the engine's, when a
// request ends there).
void release(py::object& object) {
  if (!Py_IsInitialized()) {
    object.release();  // the interpreter is gone: nothing left to decrement
    return;
  }
  py::gil_scoped_acquire gil;
  object = py::object();
}

class PyTokenConstraint : public TokenConstraint {
 public:
  explicit PyTokenConstraint(py::object state) : state_(std::move(state)) {}
  ~PyTokenConstraint() override { release(state_); }
  const py::object& state() const { return state_; }

 private:
  py::object state_;
};

const py::object& state_of(const TokenConstraint& constraint) {
  const auto* made_here = dynamic_cast<const PyTokenConstraint*>(&constraint);
  if (made_here == nullptr) throw std::logic_error("a TokenConstraint not made by mtpserve._C.TokenConstraint");
  return made_here->state();
}

py::memoryview tokens_view(std::span<const int64_t> tokens) {
  return py::memoryview::from_buffer(tokens.data(), {static_cast<py::ssize_t>(tokens.size())},
                                     {static_cast<py::ssize_t>(sizeof(int64_t))});
}

class PyTokenMasker : public TokenMasker {
 public:
  PyTokenMasker(py::function fill, py::function revise) : fill_(std::move(fill)), revise_(std::move(revise)) {}
  ~PyTokenMasker() override {
    release(fill_);
    release(revise_);
  }

  void fill(std::span<const MaskQuery> queries, int32_t* masks, int64_t rows, int64_t words) override {
    py::gil_scoped_acquire gil;
    py::list batch;
    for (const MaskQuery& q : queries) {
      // The outputs are a read-only view, valid during the call: the state reads only what it has not seen.
      batch.append(py::make_tuple(state_of(*q.constraint), tokens_view(q.outputs), drafts_list(q.drafts),
                                  q.first_row));
    }
    const auto word = static_cast<py::ssize_t>(sizeof(int32_t));
    auto view = py::memoryview::from_buffer(masks, {static_cast<py::ssize_t>(rows), static_cast<py::ssize_t>(words)},
                                            {words * word, word}, /*readonly=*/false);
    fill_(batch, view);
  }

  void revise_drafts(std::span<const DraftRevision> revisions) override {
    py::gil_scoped_acquire gil;
    py::list batch;
    for (const DraftRevision& r : revisions) {
      batch.append(py::make_tuple(state_of(*r.constraint), tokens_view(r.outputs), drafts_list(*r.drafts)));
    }
    const py::list revised = revise_(batch);
    for (size_t i = 0; i < revisions.size(); ++i) {
      auto drafts = revised[i].cast<std::vector<int64_t>>();
      if (drafts.size() > revisions[i].drafts->size()) throw std::logic_error("revise_drafts made drafts longer");
      *revisions[i].drafts = std::move(drafts);
    }
  }

 private:
  static py::list drafts_list(std::span<const int64_t> drafts) {
    py::list out;
    for (int64_t d : drafts) out.append(d);
    return out;
  }

  py::object fill_, revise_;
};

}  // namespace

void bind_token_constraints(py::module_& m) {
  py::class_<TokenConstraint, std::shared_ptr<TokenConstraint>>(
      m, "TokenConstraint", "A request's grammar state (SamplingParams.constraint): any Python object.")
      .def(py::init([](py::object state) -> std::shared_ptr<TokenConstraint> {
             return std::make_shared<PyTokenConstraint>(std::move(state));
           }),
           py::arg("state"))
      .def_property_readonly("state", [](const TokenConstraint& c) { return state_of(c); });
  py::class_<TokenMasker, std::shared_ptr<TokenMasker>>(
      m, "TokenMasker",
      "EngineConfig.token_masker, called on the engine thread once per step with constrained requests. "
      "fill(queries, masks): queries [(state, outputs, drafts, first_row)], outputs a read-only int64 "
      "memoryview of every output token so far; masks a writable int32 memoryview [rows, words], all bits "
      "set; clear bit t % 32 of word t // 32 in row first_row + j to forbid token t after outputs + drafts[:j]. "
      "revise_drafts(revisions): revisions [(state, outputs, drafts)]; returns each request's drafts (a list "
      "no longer than the one given).")
      .def(py::init([](py::function fill, py::function revise_drafts) -> std::shared_ptr<TokenMasker> {
             return std::make_shared<PyTokenMasker>(std::move(fill), std::move(revise_drafts));
           }),
           py::arg("fill"), py::arg("revise_drafts"));
}

}  // namespace mtpserve::bindings
