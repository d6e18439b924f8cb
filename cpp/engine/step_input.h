#pragma once
// Everything one forward needs, built on the host as one int64 buffer (the wire) and moved to the
// device in one copy; DeviceStep is the device's view of it.
#include <ATen/core/Tensor.h>

#include <optional>
#include <span>
#include <vector>

#include "core/scheduler.h"
#include "kernels/attention_metadata.h"
#include "kernels/row_buckets.h"

namespace mtpserve {

// The fixed shape a forward is padded to so that it can replay a captured graph: `seqs` sequences
// of `query_len` rows, `samples_per_seq` of them sampled (query_len: every row; or 1: the last real
// row), block tables of `table_width` entries, and `max_context_len` as the launches' bound.
struct StepShape {
  int64_t seqs = 0, query_len = 0, samples_per_seq = 0, table_width = 0, max_context_len = 0;
};

struct StepInput {
  std::vector<int64_t> query_start;   // per sequence (+ 1): its first row
  std::vector<int64_t> first_sample;  // per sequence: its first entry among the sampled rows
  std::vector<int64_t> num_samples;   // per sequence: 0, 1, or 1 + drafts when verifying
  std::optional<StepShape> shape;     // set when padded to a graph's shape
  // [tokens, samples, seqs, table width, max query len, max context len | token ids, positions, slots,
  //  sample rows, source rows, block tables, query_start, context_lens, sampled_start, sampled_context |
  //  first_sample, num_samples]: the middle part is what moves to the device. sampled_start and
  //  sampled_context are query_start and context_lens for the sampled rows alone.
  std::vector<int64_t> wire;

  std::span<const int64_t> packed() const;
  int64_t sampled_rows() const { return wire[1]; }
};

// One forward's inputs on the device: views of its packed part, and the int32 attention metadata.
struct DeviceStep {
  at::Tensor token_ids;    // [tokens]
  at::Tensor positions;    // [tokens] rotary positions
  at::Tensor sample_rows;  // [samples] rows whose outputs are needed
  at::Tensor source_rows;  // MTP forwards: the rows of the previous forward's outputs each row reads
  kernels::AttentionMetadata attention;
  // The attention of the sampled rows alone (writing nothing): each sees what it sees in `attention`.
  kernels::AttentionMetadata sampled_attention;
};

// The packed parts of `inputs`, concatenated, on `device` (one copy; from pinned memory to a GPU).
at::Tensor upload(std::span<const StepInput> inputs, const at::Device& device);
// The same into the first words of `buffer` (a device tensor of int64 words, at least as many); returns them.
at::Tensor upload_into(const at::Tensor& buffer, std::span<const StepInput> inputs);
// The device views of each input in `buffer` (what upload() returned or filled).
std::vector<DeviceStep> device_steps(const at::Tensor& buffer, std::span<const StepInput> inputs);

// Rebuilds a StepInput from its wire (tensor-parallel workers).
StepInput step_input_from_wire(std::span<const int64_t> wire);

// Collects sequences' rows on the host; build() makes the StepInput.
class StepBuilder {
 public:
  // Without a shape, `eager_rows` pads the step with one sequence that writes nothing, so that its rows and its
  // sampled rows number eager_rows(n) each.
  explicit StepBuilder(int64_t block_size, std::optional<StepShape> shape = std::nullopt,
                       kernels::EagerRowsFn eager_rows = nullptr)
      : block_size_(block_size), shape_(shape), eager_rows_(eager_rows) {}

  // Rows for cache positions [first, first + tokens.size()) of one sequence, the last
  // `num_samples` of them sampled; rotary positions are the cache positions + rope_offset. MTP
  // forwards read rows first_source, first_source + 1, ... of the previous forward's outputs.
  // Padded to the shape, the extra rows repeat the last one and write nothing to the cache.
  void add(const std::vector<int32_t>& block_table, int64_t first, std::span<const int64_t> tokens,
           int64_t num_samples, int64_t rope_offset = 0, int64_t first_source = 0);
  // The same, row i reading sources[i] (one per token).
  void add(const std::vector<int32_t>& block_table, int64_t first, std::span<const int64_t> tokens,
           int64_t num_samples, int64_t rope_offset, std::span<const int64_t> sources);
  // A sequence that writes nothing and whose outputs nobody reads (one row, or the shape's).
  void add_padding();
  StepInput build();

 private:
  void add_rows(const std::vector<int32_t>* table, int64_t first, std::span<const int64_t> tokens,
                int64_t num_samples, int64_t rope_offset, std::span<const int64_t> sources, bool write);
  void pad_eager();

  int64_t block_size_;
  std::optional<StepShape> shape_;
  kernels::EagerRowsFn eager_rows_;
  StepInput out_;
  std::vector<int64_t> tokens_, positions_, slots_, samples_, sources_, query_start_{0}, context_lens_;
  std::vector<int64_t> sampled_start_{0}, sampled_context_;
  std::vector<const std::vector<int32_t>*> tables_;
};

// The target step: a sequence feeds (tokens ++ draft_tokens)[num_computed : num_computed + n], and
// every fed row from its last known token on is sampled (that row, then one per draft).
StepInput build_step_input(const std::vector<ScheduledSequence>& scheduled, int64_t block_size,
                           std::optional<StepShape> shape = std::nullopt, kernels::EagerRowsFn eager_rows = nullptr);

}  // namespace mtpserve
