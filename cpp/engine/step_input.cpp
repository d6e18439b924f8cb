#include "engine/step_input.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace mtpserve {

namespace {

// wire[0..5]: tokens, samples, seqs, table width, max query len, max context len.
constexpr int64_t kHeader = 6;

struct WireSizes {
  int64_t tokens, samples, seqs, width;
  int64_t tables() const { return 4 * tokens + samples; }  // offset of the block tables in the packed part
  int64_t lens() const { return tables() + seqs * width; }  // offset of query_start
  int64_t packed() const { return lens() + 4 * seqs + 2; }
};

WireSizes sizes_of(std::span<const int64_t> wire) {
  if (wire.size() < kHeader) throw std::invalid_argument("step wire: too short for its header");
  return {wire[0], wire[1], wire[2], wire[3]};
}

// The host fields of a StepInput, read back from its wire.
StepInput from_wire(std::vector<int64_t> wire, std::optional<StepShape> shape) {
  const WireSizes z = sizes_of(wire);
  if (static_cast<int64_t>(wire.size()) != kHeader + z.packed() + 2 * z.seqs) {
    throw std::invalid_argument("step wire: " + std::to_string(wire.size()) + " values do not match its header");
  }
  StepInput out;
  const auto lens = wire.begin() + kHeader + z.lens();
  out.query_start.assign(lens, lens + z.seqs + 1);
  const auto tail = wire.begin() + kHeader + z.packed();
  out.first_sample.assign(tail, tail + z.seqs);
  out.num_samples.assign(tail + z.seqs, tail + 2 * z.seqs);
  out.shape = shape;
  out.wire = std::move(wire);
  return out;
}

}  // namespace

std::span<const int64_t> StepInput::packed() const {
  return std::span<const int64_t>(wire).subspan(kHeader, sizes_of(wire).packed());
}

namespace {

at::Tensor pack(std::span<const StepInput> inputs, bool pinned) {
  int64_t total = 0;
  for (const auto& input : inputs) total += static_cast<int64_t>(input.packed().size());
  auto host = at::empty({total}, at::TensorOptions(at::kLong).pinned_memory(pinned));
  int64_t* dst = host.data_ptr<int64_t>();
  for (const auto& input : inputs) dst = std::ranges::copy(input.packed(), dst).out;
  return host;
}

}  // namespace

at::Tensor upload(std::span<const StepInput> inputs, const at::Device& device) {
  return pack(inputs, device.is_cuda()).to(device, /*non_blocking=*/true);
}

at::Tensor upload_into(const at::Tensor& buffer, std::span<const StepInput> inputs) {
  const auto host = pack(inputs, buffer.is_cuda());
  auto words = buffer.narrow(0, 0, host.numel());
  words.copy_(host, /*non_blocking=*/true);
  return words;
}

std::vector<DeviceStep> device_steps(const at::Tensor& buffer, std::span<const StepInput> inputs) {
  std::vector<DeviceStep> steps;
  int64_t offset = 0;
  for (const auto& input : inputs) {
    const WireSizes z = sizes_of(input.wire);
    auto part = buffer.narrow(0, offset, z.packed());
    offset += z.packed();
    const int64_t t = z.tokens;
    DeviceStep s;
    s.token_ids = part.narrow(0, 0, t);
    s.positions = part.narrow(0, t, t);
    s.sample_rows = part.narrow(0, 3 * t, z.samples);
    s.source_rows = part.narrow(0, 3 * t + z.samples, t);
    auto& meta = s.attention;
    meta.slot_mapping = part.narrow(0, 2 * t, t);
    meta.block_tables = part.narrow(0, z.tables(), z.seqs * z.width).view({z.seqs, z.width}).to(at::kInt);
    meta.num_seqs = z.seqs;
    meta.max_query_len = input.wire[4];
    meta.max_context_len = input.wire[5];
    // Both metadata's starts and lengths, converted in one op on the device and one on the host.
    const auto lens = part.narrow(0, z.lens(), 4 * z.seqs + 2).to(at::kInt);
    const int64_t* host = input.wire.data() + kHeader + z.lens();
    const auto host_lens = at::tensor(at::ArrayRef<int64_t>(host, 4 * z.seqs + 2), at::kLong).to(at::kInt);
    const int64_t sampled_at = 2 * z.seqs + 1;  // where sampled_start begins, after query_start and context_lens
    const int64_t* sampled_start = host + sampled_at;
    auto& sampled = s.sampled_attention;
    sampled.block_tables = meta.block_tables;
    sampled.num_seqs = z.seqs;
    sampled.max_context_len = meta.max_context_len;
    for (int64_t q = 0; q < z.seqs; ++q) {
      sampled.max_query_len = std::max(sampled.max_query_len, sampled_start[q + 1] - sampled_start[q]);
    }
    const auto view_lens = [&](kernels::AttentionMetadata& m, int64_t at) {
      m.query_start = lens.narrow(0, at, z.seqs + 1);
      m.context_lens = lens.narrow(0, at + z.seqs + 1, z.seqs);
      m.host_query_start = host_lens.narrow(0, at, z.seqs + 1);
      m.host_context_lens = host_lens.narrow(0, at + z.seqs + 1, z.seqs);
    };
    view_lens(meta, 0);
    view_lens(sampled, sampled_at);
    steps.push_back(std::move(s));
  }
  return steps;
}

StepInput step_input_from_wire(std::span<const int64_t> wire) {
  return from_wire(std::vector<int64_t>(wire.begin(), wire.end()), std::nullopt);
}

void StepBuilder::add(const std::vector<int32_t>& block_table, int64_t first, std::span<const int64_t> tokens,
                      int64_t num_samples, int64_t rope_offset, int64_t first_source) {
  std::vector<int64_t> sources(tokens.size());
  for (size_t i = 0; i < sources.size(); ++i) sources[i] = first_source + static_cast<int64_t>(i);
  add_rows(&block_table, first, tokens, num_samples, rope_offset, sources, /*write=*/true);
}

void StepBuilder::add(const std::vector<int32_t>& block_table, int64_t first, std::span<const int64_t> tokens,
                      int64_t num_samples, int64_t rope_offset, std::span<const int64_t> sources) {
  if (sources.size() != tokens.size()) throw std::logic_error("StepBuilder: one source row per token");
  add_rows(&block_table, first, tokens, num_samples, rope_offset, sources, /*write=*/true);
}

void StepBuilder::add_padding() {
  const int64_t zero = 0;
  const std::span<const int64_t> one(&zero, 1);
  add_rows(nullptr, 0, one, 1, 0, one, /*write=*/false);
}

void StepBuilder::add_rows(const std::vector<int32_t>* table, int64_t first, std::span<const int64_t> tokens,
                           int64_t num_samples, int64_t rope_offset, std::span<const int64_t> sources, bool write) {
  const auto count = static_cast<int64_t>(tokens.size());
  const int64_t rows = shape_ ? shape_->query_len : count;
  const bool sample_all = shape_ && shape_->samples_per_seq == rows;
  if (count == 0 || count > rows || (shape_ && !sample_all && num_samples != 1)) {
    throw std::logic_error("StepBuilder: a sequence's rows do not fit the step's shape");
  }
  const int64_t sampled_from = sample_all ? 0 : count - num_samples;
  const int64_t last_sampled = sample_all ? rows - 1 : count - 1;  // in a sequence that samples at all
  const auto row0 = static_cast<int64_t>(tokens_.size());
  out_.first_sample.push_back(static_cast<int64_t>(samples_.size()) + count - num_samples - sampled_from);
  out_.num_samples.push_back(num_samples);
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t real = std::min(i, count - 1), pos = first + real;
    tokens_.push_back(tokens[real]);
    positions_.push_back(pos + rope_offset);
    const bool writes = write && i < count;
    slots_.push_back(writes ? int64_t{(*table)[pos / block_size_]} * block_size_ + pos % block_size_ : -1);
    sources_.push_back(sources[real]);
    if (i >= sampled_from && (i < count || sample_all)) samples_.push_back(row0 + i);
  }
  query_start_.push_back(row0 + rows);
  context_lens_.push_back(first + rows);
  sampled_start_.push_back(static_cast<int64_t>(samples_.size()));
  sampled_context_.push_back(first + last_sampled + 1);
  tables_.push_back(table);
}

void StepBuilder::pad_eager() {
  const auto rows = static_cast<int64_t>(tokens_.size()), samples = static_cast<int64_t>(samples_.size());
  if (rows == 0) return;
  const int64_t extra_samples = eager_rows_(samples) - samples;
  const int64_t extra_rows = eager_rows_(rows + extra_samples) - rows;
  if (extra_rows == 0) return;
  const std::vector<int64_t> zeros(extra_rows, 0);
  add_rows(nullptr, 0, zeros, extra_samples, 0, zeros, /*write=*/false);
}

StepInput StepBuilder::build() {
  if (!shape_ && eager_rows_ != nullptr) pad_eager();
  if (shape_) {
    if (static_cast<int64_t>(tables_.size()) > shape_->seqs) {
      throw std::logic_error("StepBuilder: more sequences than the step's shape holds");
    }
    while (static_cast<int64_t>(tables_.size()) < shape_->seqs) add_padding();
  }
  int64_t width = 1, max_query = 0, max_context = 0;
  for (size_t s = 0; s < tables_.size(); ++s) {
    // A padding sequence attends over its rows through a table of zeros (block 0), which must cover them.
    const int64_t covers = block_size_ > 0 ? (context_lens_[s] + block_size_ - 1) / block_size_ : 0;
    width = std::max<int64_t>(width, tables_[s] ? static_cast<int64_t>(tables_[s]->size()) : covers);
  }
  for (size_t s = 0; s < tables_.size(); ++s) {
    max_query = std::max(max_query, query_start_[s + 1] - query_start_[s]);
    max_context = std::max(max_context, context_lens_[s]);
  }
  if (shape_) {
    if (width > shape_->table_width) throw std::logic_error("StepBuilder: a block table is wider than the shape's");
    width = shape_->table_width;
    max_context = shape_->max_context_len;
  }
  const auto t = static_cast<int64_t>(tokens_.size()), n = static_cast<int64_t>(samples_.size());
  const auto seqs = static_cast<int64_t>(tables_.size());
  std::vector<int64_t> wire{t, n, seqs, width, max_query, max_context};
  wire.reserve(kHeader + 4 * t + n + seqs * width + 6 * seqs + 2);
  for (auto* part : {&tokens_, &positions_, &slots_, &samples_, &sources_}) {
    wire.insert(wire.end(), part->begin(), part->end());
  }
  for (const auto* table : tables_) {
    const size_t used = table ? table->size() : 0;
    if (table) wire.insert(wire.end(), table->begin(), table->end());
    wire.resize(wire.size() + width - used, 0);
  }
  for (auto* part : {&query_start_, &context_lens_, &sampled_start_, &sampled_context_, &out_.first_sample,
                     &out_.num_samples}) {
    wire.insert(wire.end(), part->begin(), part->end());
  }
  return from_wire(std::move(wire), shape_);
}

StepInput build_step_input(const std::vector<ScheduledSequence>& scheduled, int64_t block_size,
                           std::optional<StepShape> shape, kernels::EagerRowsFn eager_rows) {
  StepBuilder builder(block_size, shape, eager_rows);
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
  return builder.build();
}

}  // namespace mtpserve
