#pragma once
// The engine's outputs as Python struct sequences (mtpserve._C.RequestOutput, SpecCounters and TokenLogprobs), and as
// the plain tuples that carry them to another process.
#include <pybind11/pybind11.h>

#include <vector>

#include "engine/request_output.h"

namespace mtpserve::bindings {

void bind_output_structs(pybind11::module_& m);
pybind11::list output_structs(const std::vector<RequestOutput>& outputs);
pybind11::object spec_struct(const SpecCounters& spec);
pybind11::list output_states(const std::vector<RequestOutput>& outputs);
pybind11::list structs_from_states(const pybind11::list& states);

}  // namespace mtpserve::bindings
