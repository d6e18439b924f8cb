#include "kernels/cuda/sampling_cuda.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>

#include <limits>
#include <string>

#include "kernels/cuda/sampling.cuh"
#include "kernels/cuda/tensor_args.h"

namespace mtpserve::kernels::cuda {

namespace {

// Shapes, dtypes and devices only: values (rows, drafts in range) would need a synchronisation, so
// the kernel guards them instead (sampling.cuh).
void check(const at::Tensor& probs, const DraftTensors& d, int64_t max_drafts) {
  require(probs.dim() == 2 && probs.scalar_type() == at::kFloat && probs.is_cuda(),
          "sample_and_verify: probs must be a float32 [rows, vocab] CUDA tensor");
  require(probs.size(1) > 0 && probs.size(1) <= std::numeric_limits<int32_t>::max(),
          "sample_and_verify: the vocabulary must have 1 .. 2^31 - 1 tokens");
  require(max_drafts >= 0, "sample_and_verify: max_drafts must be >= 0");
  const int64_t seqs = d.first_row.numel();
  for (const at::Tensor* t : {&d.first_row, &d.num_drafts, &d.seed, &d.first_draw}) {
    require(t->dim() == 1 && t->size(0) == seqs && t->scalar_type() == at::kLong,
            "sample_and_verify: first_row, num_drafts, seed and first_draw must be int64 [seqs] (seqs = " +
                std::to_string(seqs) + ")");
  }
  require(d.greedy.dim() == 1 && d.greedy.size(0) == seqs && d.greedy.scalar_type() == at::kBool,
          "sample_and_verify: greedy must be bool [seqs]");
  require(d.drafts.dim() == 2 && d.drafts.size(0) == seqs && d.drafts.size(1) == max_drafts &&
              d.drafts.scalar_type() == at::kLong,
          "sample_and_verify: drafts must be int64 [seqs, max_drafts] (max_drafts = " + std::to_string(max_drafts) +
              ")");
  for (const at::Tensor* t : {&d.first_row, &d.num_drafts, &d.drafts, &d.seed, &d.first_draw, &d.greedy}) {
    require(t->device() == probs.device(), "sample_and_verify: every tensor must be on probs' device " +
                                               probs.device().str());
  }
}

}  // namespace

SampledTokens sample_and_verify(const at::Tensor& probs_in, const DraftTensors& d, int64_t max_drafts) {
  check(probs_in, d, max_drafts);
  c10::cuda::CUDAGuard guard(probs_in.device());
  auto probs = probs_in.contiguous();
  auto first_row = d.first_row.contiguous(), num_drafts = d.num_drafts.contiguous(), drafts = d.drafts.contiguous();
  auto seed = d.seed.contiguous(), first_draw = d.first_draw.contiguous(), greedy = d.greedy.contiguous();
  const int64_t seqs = first_row.size(0);
  auto tokens = at::empty({seqs, max_drafts + 1}, first_row.options());
  auto accepted = at::empty({seqs}, first_row.options());
  SampleLaunch p{probs.data_ptr<float>(), first_row.data_ptr<int64_t>(), num_drafts.data_ptr<int64_t>(),
                 drafts.data_ptr<int64_t>(), seed.data_ptr<int64_t>(), first_draw.data_ptr<int64_t>(),
                 greedy.data_ptr<bool>(), tokens.data_ptr<int64_t>(), accepted.data_ptr<int64_t>(), seqs,
                 probs.size(0), probs.size(1), max_drafts};
  check_launch(launch_sample_and_verify(p, stream_of(probs)), "sample_and_verify");
  return {tokens, accepted};
}

}  // namespace mtpserve::kernels::cuda
