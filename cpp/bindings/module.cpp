// mtpserve._C: the C++ runtime as seen from Python.
#include <torch/extension.h>

namespace mtpserve::bindings {
void bind_model(pybind11::module_& m);
void bind_token_constraints(pybind11::module_& m);
void bind_core(pybind11::module_& m);
void bind_engine(pybind11::module_& m);
void bind_kernels(pybind11::module_& m);
}  // namespace mtpserve::bindings

PYBIND11_MODULE(_C, m) {
  m.doc() = "mtpserve C++ runtime";
  mtpserve::bindings::bind_model(m);
  mtpserve::bindings::bind_token_constraints(m);
  mtpserve::bindings::bind_core(m);
  mtpserve::bindings::bind_engine(m);
  mtpserve::bindings::bind_kernels(m);
#ifdef MTPSERVE_WITH_CUDA
  m.attr("has_cuda_kernels") = true;
#else
  m.attr("has_cuda_kernels") = false;
#endif
#ifdef MTPSERVE_WITH_ASCENDC
  m.attr("has_ascendc_kernels") = true;
#else
  m.attr("has_ascendc_kernels") = false;
#endif
}
