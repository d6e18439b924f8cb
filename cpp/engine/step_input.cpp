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

namespace {

// The packed part of wire on `device` in one copy (from pinned memory when the device is a GPU).
at::Tensor to_device(const std::vector<int64_t>& wire, int64_t offset, int64_t count, const at::Device& device) {
  auto host = at::empty({count}, at::TensorOptions(at::kLong).pinned_memory(device.is_cuda()));
  std::copy_n(wire.data() + offset, count, host.data_ptr<int64_t>());
  return host.to(device, /*non_blocking=*/true);
}

// Views of the device copy of wire's packed part, and the host vectors after it.
StepInput unpack(std::vector<int64_t> wire, const at::Device& device) {
  const int64_t t = wire[0], n = wire[1], seqs = wire[2], width = wire[3];
  const int64_t tables = 3 * t + n, lens = tables + seqs * width, packed = lens + 2 * seqs + 1;
  auto buffer = to_device(wire, 4, packed, device);
  StepInput out;
  out.token_ids = buffer.narrow(0, 0, t);
  out.positions = buffer.narrow(0, t, t);
  out.sample_rows = buffer.narrow(0, 3 * t, n);
  auto& meta = out.attention;
  meta.slot_mapping = buffer.narrow(0, 2 * t, t);
  meta.block_tables = buffer.narrow(0, tables, seqs * width).view({seqs, width}).to(at::kInt);
  meta.query_start = buffer.narrow(0, lens, seqs + 1).to(at::kInt);
  meta.context_lens = buffer.narrow(0, lens + seqs + 1, seqs).to(at::kInt);
  meta.num_seqs = seqs;
  auto it = wire.begin() + 4 + lens;
  auto take = [&](int64_t count) {
    std::vector<int64_t> part(it, it + count);
    it += count;
    return part;
  };
  out.query_start = take(seqs + 1);
  const auto context_lens = take(seqs);
  for (int64_t s = 0; s < seqs; ++s) {
    meta.max_query_len = std::max(meta.max_query_len, out.query_start[s + 1] - out.query_start[s]);
    meta.max_context_len = std::max(meta.max_context_len, context_lens[s]);
  }
  out.first_sample = take(seqs);
  out.num_samples = take(seqs);
  out.wire = std::move(wire);
  return out;
}

}  // namespace

StepInput StepBuilder::build(const at::Device& device) {
  int64_t width = 1;
  for (const auto* t : tables_) width = std::max<int64_t>(width, static_cast<int64_t>(t->size()));
  const auto t = static_cast<int64_t>(tokens_.size()), n = static_cast<int64_t>(samples_.size());
  const auto seqs = static_cast<int64_t>(tables_.size());
  std::vector<int64_t> wire{t, n, seqs, width};
  wire.reserve(4 + 3 * t + n + seqs * width + 4 * seqs + 1);
  for (auto* part : {&tokens_, &positions_, &slots_, &samples_}) wire.insert(wire.end(), part->begin(), part->end());
  for (const auto* table : tables_) {
    wire.insert(wire.end(), table->begin(), table->end());
    wire.resize(wire.size() + width - table->size(), 0);
  }
  for (auto* part : {&query_start_, &context_lens_, &out_.first_sample, &out_.num_samples}) {
    wire.insert(wire.end(), part->begin(), part->end());
  }
  // One host buffer, one copy to the device, then views into it.
  return unpack(std::move(wire), device);
}

StepInput step_input_from_wire(std::span<const int64_t> wire, const at::Device& device) {
  return unpack(std::vector<int64_t>(wire.begin(), wire.end()), device);
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
