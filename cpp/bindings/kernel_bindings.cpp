// Kernel-level entry points, for testing the kernels against plain references.
#include <pybind11/stl.h>
#include <torch/extension.h>

#include <numeric>

#include "kernels/attention.h"

namespace py = pybind11;

namespace mtpserve::bindings {

void bind_kernels(py::module_& m) {
  m.def(
      "mla_absorbed_attention",
      [](const at::Tensor& q, const at::Tensor& cache, std::vector<int64_t> query_start,
         std::vector<int64_t> context_lens, at::Tensor block_tables, int64_t kv_lora_rank, double scale) {
        kernels::AttentionMetadata meta{at::Tensor(), std::move(block_tables), std::move(query_start),
                                        std::move(context_lens)};
        std::vector<int64_t> seqs(meta.num_seqs());
        std::iota(seqs.begin(), seqs.end(), 0);
        return kernels::mla_absorbed_attention(q, cache, meta, seqs, kv_lora_rank, scale);
      },
      py::arg("q"), py::arg("cache"), py::arg("query_start"), py::arg("context_lens"), py::arg("block_tables"),
      py::arg("kv_lora_rank"), py::arg("scale"),
      "Fused absorbed MLA over the paged latent cache: all query rows x heads of a sequence in one pass.");
}

}  // namespace mtpserve::bindings
