#include "engine/step_input.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace mtpserve {

void StepBuilder::add(const std::vector<int32_t>& block_table, int64_t first, std::span<const int64_t> tokens,
                      int64_t num_samples, int64_t rope_offset) {
  const auto count = static_cast<int64_t>(tokens.size());
  const auto row0 = static_cast<int64_t>(tokens_.size());
  out_.first_sample.push_back(static_cast<int64_t>(samples_.size()));
  out_.num_samples.push_back(num_samples);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t pos = first + i;
    tokens_.push_back(tokens[i]);
    positions_.push_back(pos + rope_offset);
    slots_.push_back(int64_t{block_table[pos / block_size_]} * block_size_ + pos % block_size_);
    if (i >= count - num_samples) samples_.push_back(row0 + i);
  }
  query_start_.push_back(row0 + count);
  context_lens_.push_back(first + count);
  tables_.push_back(&block_table);
}

StepInput StepBuilder::build(const at::Device& device) {
  int64_t width = 1;
  for (const auto* t : tables_) width = std::max<int64_t>(width, static_cast<int64_t>(t->size()));
  std::vector<int64_t> tables;
  for (const auto* t : tables_) {
    tables.insert(tables.end(), t->begin(), t->end());
    tables.resize(tables.size() + width - t->size(), 0);
  }
  // One host buffer, one copy to the device, then views into it.
  const auto t = static_cast<int64_t>(tokens_.size()), n = static_cast<int64_t>(samples_.size());
  std::vector<int64_t> packed;
  for (auto* part : {&tokens_, &positions_, &slots_, &samples_, &tables}) {
    packed.insert(packed.end(), part->begin(), part->end());
  }
  auto buffer = at::tensor(packed, at::kLong).to(device);
  out_.token_ids = buffer.narrow(0, 0, t);
  out_.positions = buffer.narrow(0, t, t);
  out_.attention.slot_mapping = buffer.narrow(0, 2 * t, t);
  out_.sample_rows = buffer.narrow(0, 3 * t, n);
  out_.attention.block_tables =
      buffer.narrow(0, 3 * t + n, static_cast<int64_t>(tables.size())).view({static_cast<int64_t>(tables_.size()), width});
  out_.attention.query_start = std::move(query_start_);
  out_.attention.context_lens = std::move(context_lens_);
  return std::move(out_);
}

StepInput build_step_input(const std::vector<ScheduledSequence>& scheduled, int64_t block_size,
                           const at::Device& device) {
  StepBuilder builder(block_size);
  std::vector<int64_t> fed;
  for (const auto& s : scheduled) {
    const Sequence& seq = *s.seq;
    const int64_t start = seq.num_computed_tokens, known = seq.num_tokens();
    fed.assign(seq.tokens.begin() + start, seq.tokens.end());
    fed.insert(fed.end(), seq.draft_tokens.begin(), seq.draft_tokens.end());
    fed.resize(s.num_new_tokens);
    const int64_t samples = std::max<int64_t>(0, start + s.num_new_tokens - (known - 1));
    builder.add(seq.block_table, start, fed, samples);
  }
  return builder.build(device);
}

}  // namespace mtpserve
