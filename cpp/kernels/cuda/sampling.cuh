#pragma once
// Sampling and speculative verification of every sequence of a step in one launch, one block per
// sequence, with the CPU kernel's decisions: the same uniforms (kernels/random_stream.h), argmax
// with the first index on ties, and the inverse-CDF draw over a float64 cumulative mass that never
// lands on a token of probability 0. The draw's cumulative sums are chunked (per thread, then
// scanned), so they differ from the CPU's sequential ones by float64 rounding only: the tokens
// differ only where u * total falls within that rounding of a token boundary.
#include <cuda_runtime.h>

#include <cstdint>

namespace mtpserve::kernels::cuda {

struct SampleLaunch {
  const float* probs;         // [rows, vocab] contiguous
  const int64_t* first_row;   // [seqs]
  const int64_t* num_drafts;  // [seqs]
  const int64_t* drafts;      // [seqs, max_drafts]
  const int64_t* seed;        // [seqs]: the request's uint64 seed, bit for bit
  const int64_t* first_draw;  // [seqs]
  const bool* greedy;         // [seqs]
  int64_t* tokens;            // [seqs, max_drafts + 1]: accepted drafts, correction or bonus, then -1
  int64_t* accepted;          // [seqs]
  int64_t seqs, rows, vocab, max_drafts;  // vocab < 2^31
};

// Inputs the host cannot check without a synchronisation are guarded here instead: a sequence
// whose rows fall outside probs emits the single token -1 (accepted 0), and a draft outside the
// vocabulary is rejected (probability 0). The CPU kernel throws on both.
cudaError_t launch_sample_and_verify(const SampleLaunch& p, cudaStream_t stream);

}  // namespace mtpserve::kernels::cuda
