#pragma once
// Where each sequence of a step lives in the paged latent cache. Built once per step on the host
// and moved to the compute device with the rest of the step; every layer reuses it. The host
// scalars size launches; kernels never read per-sequence data through host pointers.
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace mtpserve::kernels {

struct AttentionMetadata {
  at::Tensor slot_mapping;  // [tokens] int64: cache row of each new token; < 0: padding, not written
  at::Tensor block_tables;  // [seqs, max_blocks] int32
  at::Tensor query_start;   // [seqs + 1] int32: token rows of sequence b are [query_start[b], query_start[b + 1])
  at::Tensor context_lens;  // [seqs] int32: cached tokens of each sequence once this step is written
  int64_t num_seqs = 0;
  int64_t max_query_len = 0;    // longest query of the step
  int64_t max_context_len = 0;  // longest context of the step (an upper bound is fine)
  // query_start and context_lens again, in host memory (int32), for kernels that plan their launch on the
  // host (the NPU's): reading the device copies would make every layer wait for the device.
  at::Tensor host_query_start;
  at::Tensor host_context_lens;
};

}  // namespace mtpserve::kernels
