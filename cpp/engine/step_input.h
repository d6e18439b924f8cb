#pragma once
// Everything one forward needs, built once on the host and moved to the device in one copy.
#include <ATen/core/Tensor.h>

#include <span>
#include <vector>

#include "core/scheduler.h"
#include "kernels/attention_metadata.h"

namespace mtpserve {

struct StepInput {
  at::Tensor token_ids;  // [tokens]
  at::Tensor positions;  // [tokens] rotary positions
  kernels::AttentionMetadata attention;
  at::Tensor sample_rows;             // [samples] rows whose logits are needed
  std::vector<int64_t> query_start;   // host copy of attention.query_start
  std::vector<int64_t> first_sample;  // per sequence: its first entry in sample_rows
  std::vector<int64_t> num_samples;   // per sequence: 0, 1, or 1 + drafts when verifying
  // The whole step as one int64 host buffer (what tensor-parallel workers receive):
  // [tokens, samples, seqs, table width, token ids, positions, slots, sample rows, block tables,
  //  query_start, context_lens, first_sample, num_samples]; everything up to context_lens moves
  // to the device in one copy.
  std::vector<int64_t> wire;
};

// Rebuilds a StepInput from StepInput::wire (one copy to `device`, as build() does).
StepInput step_input_from_wire(std::span<const int64_t> wire, const at::Device& device);

// Collects sequences' rows on the host; build() makes the StepInput.
class StepBuilder {
 public:
  explicit StepBuilder(int64_t block_size) : block_size_(block_size) {}

  // Rows for cache positions [first, first + tokens.size()) of one sequence, the last
  // `num_samples` of them sampled; rotary positions are the cache positions + rope_offset.
  void add(const std::vector<int32_t>& block_table, int64_t first, std::span<const int64_t> tokens,
           int64_t num_samples, int64_t rope_offset = 0);
  StepInput build(const at::Device& device);

 private:
  int64_t block_size_;
  StepInput out_;
  std::vector<int64_t> tokens_, positions_, slots_, samples_, query_start_{0}, context_lens_;
  std::vector<const std::vector<int32_t>*> tables_;
};

// The target step: a sequence feeds (tokens ++ draft_tokens)[num_computed : num_computed + n], and
// every fed row from its last known token on is sampled (that row, then one per draft).
StepInput build_step_input(const std::vector<ScheduledSequence>& scheduled, int64_t block_size,
                           const at::Device& device);

}  // namespace mtpserve
