#include "engine/mtp_drafter.h"

#include <ATen/ATen.h>

#include "dist/step_broadcast.h"
#include "engine/step_input.h"

namespace mtpserve {

namespace {

// Runs the MTP layer over `input`; returns (argmax token, output hidden) of each sampled row.
std::pair<std::vector<int64_t>, at::Tensor> run(const MtpLayer& layer, const RotaryEmbedding& rope,
                                                const at::Tensor& cache, const StepInput& input,
                                                const at::Tensor& previous_hidden) {
  auto hidden = layer.forward(input.token_ids, previous_hidden, input.positions, rope, cache, input.attention)
                    .index_select(0, input.sample_rows);
  auto tokens = layer.logits(hidden).argmax(-1).cpu();
  return {std::vector<int64_t>(tokens.data_ptr<int64_t>(), tokens.data_ptr<int64_t>() + tokens.numel()), hidden};
}

}  // namespace

void MtpDrafter::propose(const std::vector<DraftRequest>& requests, const at::Tensor& target_hidden) const {
  if (requests.empty()) return;
  const at::Device device = target_hidden.device();
  // Fill: every newly computed pair, sampling the last one of each sequence.
  StepBuilder fill(block_size_);
  std::vector<int64_t> hidden_rows;
  for (const auto& r : requests) {
    const auto& tokens = r.seq->tokens;
    fill.add(r.seq->block_table, r.first_pair,
             std::span<const int64_t>(tokens).subspan(r.first_pair + 1, r.num_pairs), 1, /*rope_offset=*/1);
    for (int64_t i = 0; i < r.num_pairs; ++i) hidden_rows.push_back(r.hidden_row + i);
  }
  auto rows = at::tensor(hidden_rows, at::kLong).to(device);
  StepInput fill_input = fill.build(device);
  if (broadcast_) send_step(*broadcast_, StepKind::kMtpFill, fill_input.wire, hidden_rows);
  auto [drafts, hidden] = run(layer_, rope_, cache_, fill_input, target_hidden.index_select(0, rows));

  std::vector<size_t> active;  // requests still drafting, with their row in `hidden`
  for (size_t i = 0; i < requests.size(); ++i) {
    requests[i].seq->draft_tokens.clear();
    if (requests[i].num_drafts > 0) {
      requests[i].seq->draft_tokens.push_back(drafts[i]);
      active.push_back(i);
    }
  }
  // Recurse: draft j + 1 from (draft j, the layer's output for draft j's predecessor).
  for (int64_t j = 1; !active.empty(); ++j) {
    std::vector<size_t> next;
    std::vector<int64_t> prev_rows;
    StepBuilder step(block_size_);
    for (size_t a = 0; a < active.size(); ++a) {
      const DraftRequest& r = requests[active[a]];
      if (r.num_drafts <= j) continue;
      const int64_t pair = r.first_pair + r.num_pairs + j - 1;
      step.add(r.seq->block_table, pair, std::span<const int64_t>(&r.seq->draft_tokens.back(), 1), 1, 1);
      prev_rows.push_back(static_cast<int64_t>(a));
      next.push_back(active[a]);
    }
    if (next.empty()) break;
    auto prev = hidden.index_select(0, at::tensor(prev_rows, at::kLong).to(device));
    StepInput step_input = step.build(device);
    if (broadcast_) send_step(*broadcast_, StepKind::kMtpDraft, step_input.wire, prev_rows);
    std::tie(drafts, hidden) = run(layer_, rope_, cache_, step_input, prev);
    for (size_t a = 0; a < next.size(); ++a) requests[next[a]].seq->draft_tokens.push_back(drafts[a]);
    active = std::move(next);
  }
}

}  // namespace mtpserve
