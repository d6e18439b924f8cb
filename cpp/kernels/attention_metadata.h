#pragma once
// Where each sequence of a step lives in the paged latent cache. Built once per
// step; the host vectors drive shapes, the tensors live on the compute device.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace mtpserve::kernels {

struct AttentionMetadata {
  at::Tensor slot_mapping;            // [num_tokens] int64: cache row of each new token
  at::Tensor block_tables;            // [num_seqs, max_blocks] int32
  std::vector<int64_t> query_start;   // [num_seqs + 1]: token rows of sequence b
  std::vector<int64_t> context_lens;  // [num_seqs]: cached tokens once this step is written

  int64_t num_seqs() const { return static_cast<int64_t>(context_lens.size()); }
  int64_t query_len(int64_t seq) const { return query_start[seq + 1] - query_start[seq]; }
  int64_t block_size(const at::Tensor& cache) const { return cache.size(1); }
};

}  // namespace mtpserve::kernels
