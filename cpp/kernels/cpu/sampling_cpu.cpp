// The CPU rejection sampler: a loop over sequences (and their at most k drafts), reading the step's
// tensors in place through accessors. The reference for every device's sample_and_verify.
#include "kernels/cpu/sampling_cpu.h"

#include <ATen/ATen.h>

#include <stdexcept>
#include <string>

#include "kernels/random_stream.h"

namespace mtpserve::kernels::cpu {

namespace {

using Row = at::TensorAccessor<float, 1>;

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument("sample_and_verify: " + message);
}

void check_shapes(const at::Tensor& probs, const DraftTensors& d, int64_t max_drafts) {
  require(probs.dim() == 2 && probs.scalar_type() == at::kFloat, "probs must be a float32 [rows, vocab] tensor");
  for (const at::Tensor* t : {&probs, &d.first_row, &d.num_drafts, &d.drafts, &d.seed, &d.first_draw, &d.greedy}) {
    require(t->is_cpu(), "every tensor must be on the CPU, as probs is");
  }
  require(max_drafts >= 0, "max_drafts must be >= 0");
  const int64_t seqs = d.first_row.numel();
  for (const at::Tensor* t : {&d.first_row, &d.num_drafts, &d.seed, &d.first_draw}) {
    require(t->dim() == 1 && t->size(0) == seqs && t->scalar_type() == at::kLong,
            "first_row, num_drafts, seed and first_draw must be int64 [seqs] (seqs = " + std::to_string(seqs) + ")");
  }
  require(d.greedy.dim() == 1 && d.greedy.size(0) == seqs && d.greedy.scalar_type() == at::kBool,
          "greedy must be bool [seqs]");
  require(d.drafts.dim() == 2 && d.drafts.size(0) == seqs && d.drafts.size(1) == max_drafts &&
              d.drafts.scalar_type() == at::kLong,
          "drafts must be int64 [seqs, max_drafts] (max_drafts = " + std::to_string(max_drafts) + ")");
}

// Sequence s's rows and drafts must lie inside probs: the CUDA kernel cannot say so, this one can.
void check_sequence(int64_t s, int64_t first_row, int64_t k, at::TensorAccessor<int64_t, 1> drafts, int64_t rows,
                    int64_t vocab, int64_t max_drafts) {
  auto fail = [s](const char* what) {
    throw std::invalid_argument("sample_and_verify: sequence " + std::to_string(s) + ": " + what);
  };
  if (k < 0 || k > max_drafts) fail("num_drafts must be in [0, max_drafts]");
  if (first_row < 0 || first_row + k >= rows) fail("rows first_row .. first_row + num_drafts exceed probs");
  for (int64_t j = 0; j < k; ++j) {
    if (drafts[j] < 0 || drafts[j] >= vocab) fail("a draft is outside the vocabulary");
  }
}

// First index on ties, as torch.argmax.
int64_t argmax(const Row& p) {
  int64_t best = 0;
  for (int64_t i = 1; i < p.size(0); ++i) {
    if (p[i] > p[best]) best = i;
  }
  return best;
}

// Inverse-CDF draw from p with `excluded` (a rejected draft, or -1) removed: the first token whose
// sequential float64 cumulative mass exceeds u * total (searchsorted right), clamped to the
// vocabulary and backed off zero-probability tokens, which only rounding at the very end reaches.
int64_t draw(const Row& p, double u, int64_t excluded) {
  const int64_t vocab = p.size(0);
  auto mass = [&](int64_t i) { return i == excluded ? 0.0 : static_cast<double>(p[i]); };
  double total = 0;
  for (int64_t i = 0; i < vocab; ++i) total += mass(i);
  const double target = u * total;
  double cdf = 0;
  int64_t token = vocab - 1;
  for (int64_t i = 0; i < vocab; ++i) {
    cdf += mass(i);
    if (cdf > target) {
      token = i;
      break;
    }
  }
  while (token > 0 && mass(token) == 0.0) --token;
  return token;
}

struct Outcome {
  int64_t accepted;
  int64_t token;  // the correction after the accepted drafts, or the bonus when all were accepted
};

// One sequence: its k drafts against rows first_row .. first_row + k, draw n = first_draw + j.
Outcome verify(at::TensorAccessor<float, 2> probs, int64_t first_row, at::TensorAccessor<int64_t, 1> drafts,
               int64_t k, bool greedy, uint64_t seed, uint64_t first_draw) {
  for (int64_t j = 0; j < k; ++j) {
    const Row p = probs[first_row + j];
    const uint64_t n = first_draw + j;
    if (greedy) {
      const int64_t best = argmax(p);
      if (best != drafts[j]) return {j, best};
    } else if (!(uniform(seed, n, kAcceptStream) < p[drafts[j]])) {
      return {j, draw(p, uniform(seed, n, kResampleStream), drafts[j])};
    }
  }
  const Row last = probs[first_row + k];
  return {k, greedy ? argmax(last) : draw(last, uniform(seed, first_draw + k, kDrawStream), -1)};
}

}  // namespace

SampledTokens sample_and_verify(const at::Tensor& probs, const DraftTensors& d, int64_t max_drafts) {
  check_shapes(probs, d, max_drafts);
  const int64_t seqs = d.first_row.size(0), rows = probs.size(0), vocab = probs.size(1);
  auto tokens = at::full({seqs, max_drafts + 1}, -1, at::kLong);
  auto accepted = at::empty({seqs}, at::kLong);
  auto p = probs.accessor<float, 2>();
  auto first_row = d.first_row.accessor<int64_t, 1>(), num_drafts = d.num_drafts.accessor<int64_t, 1>();
  auto drafts = d.drafts.accessor<int64_t, 2>();
  auto seed = d.seed.accessor<int64_t, 1>(), first_draw = d.first_draw.accessor<int64_t, 1>();
  auto greedy = d.greedy.accessor<bool, 1>();
  auto out = tokens.accessor<int64_t, 2>();
  auto accepted_out = accepted.accessor<int64_t, 1>();
  for (int64_t s = 0; s < seqs; ++s) {
    check_sequence(s, first_row[s], num_drafts[s], drafts[s], rows, vocab, max_drafts);
    // The seed column holds the request's uint64 seed bit for bit.
    const Outcome o = verify(p, first_row[s], drafts[s], num_drafts[s], greedy[s], static_cast<uint64_t>(seed[s]),
                             static_cast<uint64_t>(first_draw[s]));
    for (int64_t j = 0; j < o.accepted; ++j) out[s][j] = drafts[s][j];
    out[s][o.accepted] = o.token;
    accepted_out[s] = o.accepted;
  }
  return {tokens, accepted};
}

}  // namespace mtpserve::kernels::cpu
