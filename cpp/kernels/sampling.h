#pragma once
// Sampling and speculative verification over a whole step's logits rows, on the compute device.
// Draws use the counter-based uniforms of kernels/random_stream.h, keyed by (request seed, output
// index, stream), so a seeded request samples the same tokens in any batch and on any device.
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace mtpserve::kernels {

// Which stages some row of the step uses, known on the host: a stage no row uses launches nothing, and
// no row's result depends on what the others use. All on: every stage runs.
struct SamplingStages {
  bool sampled = true;  // a row samples (temperature > 0)
  bool greedy = true;   // a row is greedy (temperature 0)
  bool top_k = true;    // a sampled row's top_k is on
  bool top_p = true;    // a sampled row's top_p is below 1
  bool min_p = true;    // a sampled row's min_p is above 0
};

// How each logits row becomes a distribution (one entry per row).
struct SamplingTensors {
  at::Tensor temperature;        // [rows] float32; 0: greedy
  at::Tensor top_k;              // [rows] int64; <= 0 or >= vocab: off
  at::Tensor top_p;              // [rows] float32; 1: off
  at::Tensor min_p;              // [rows] float32; 0: off
  at::Tensor presence_penalty;   // [rows] float32
  at::Tensor frequency_penalty;  // [rows] float32
  at::Tensor penalty_tokens;     // [n] int64: each row's output tokens so far, concatenated (n may be 0)
  at::Tensor penalty_rows;       // [n] int64: the row each penalty token counts for
  at::Tensor repetition_penalty;  // [rows] float32; 1: off
  at::Tensor prompt_tokens;       // [m] int64: prompt tokens of the rows with a repetition penalty
  at::Tensor prompt_rows;         // [m] int64: the row each of them counts for
  at::Tensor bias_tokens;         // [b] int64: logit_bias and min_tokens' masks, per row
  at::Tensor bias_rows;           // [b] int64
  at::Tensor bias_values;         // [b] float32: added to the logit (-inf: never sampled)
  SamplingStages stages;
};

// [rows, vocab] float32: logits + bias, the repetition penalty on tokens of the prompt or output,
// - frequency * count - presence * [count > 0], then temperature,
// top-k, top-p (the smallest prefix of the sorted row whose mass reaches top_p; the first token
// always stays) and min-p as masks, softmax. A row with none of the three on is the softmax of its
// scaled logits, never sorted. Greedy rows are one-hot on the argmax (first index on ties) of their
// penalised logits.
using SamplingProbsFn = at::Tensor (*)(const at::Tensor& logits, const SamplingTensors& s);

// Per sequence: probs rows first_row .. first_row + num_drafts are the target distributions at the
// rows fed [last, d1..dk] (num_drafts 0: one plain sample).
struct DraftTensors {
  at::Tensor first_row;   // [seqs] int64
  at::Tensor num_drafts;  // [seqs] int64
  at::Tensor drafts;      // [seqs, max_drafts] int64 (max_drafts may be 0)
  at::Tensor seed;        // [seqs] int64: the request's uint64 seed, bit for bit
  at::Tensor first_draw;  // [seqs] int64: output index of the first token this step draws
  at::Tensor greedy;      // [seqs] bool
};

struct SampledTokens {
  at::Tensor tokens;    // [seqs, max_drafts + 1] int64: accepted drafts, then the correction or bonus; -1 after
  at::Tensor accepted;  // [seqs] int64: drafts accepted (tokens emitted = accepted + 1)
};

// Rejection sampling that leaves each row's distribution exactly the target's. For draft j (draw
// n = first_draw + j): greedy accepts it iff it is the row's argmax, else emits the argmax; sampled
// accepts it iff uniform(seed, n, kAcceptStream) < p(d), else emits a draw from p with d removed
// (uniform(seed, n, kResampleStream)). After all drafts are accepted the bonus token is the last
// row's argmax (greedy) or its draw with uniform(seed, first_draw + k, kDrawStream). A draw is the
// inverse CDF: the first token whose float64 cumulative mass exceeds u * total, never a token of
// probability 0.
using SampleAndVerifyFn = SampledTokens (*)(const at::Tensor& probs, const DraftTensors& drafts,
                                            int64_t max_drafts);

}  // namespace mtpserve::kernels
