#include "engine/mtp_drafter.h"

#include <ATen/ATen.h>

namespace mtpserve {

void MtpDrafter::propose(const std::vector<DraftRequest>& requests) const {
  if (requests.empty()) return;
  const at::Device& device = runner_.device();
  // Fill: every newly computed pair, sampling the last one of each sequence.
  StepBuilder fill(block_size_);
  std::vector<int64_t> hidden_rows;
  for (const auto& r : requests) {
    const auto& tokens = r.seq->tokens;
    fill.add(r.seq->block_table, r.first_pair,
             std::span<const int64_t>(tokens).subspan(r.first_pair + 1, r.num_pairs), 1, /*rope_offset=*/1);
    for (int64_t i = 0; i < r.num_pairs; ++i) hidden_rows.push_back(r.hidden_row + i);
  }
  std::vector<at::Tensor> drafts{runner_.run(StepKind::kMtpFill, fill.build(device), hidden_rows)};
  // owners[j][a]: the request whose draft j + 1 is row a of drafts[j].
  std::vector<std::vector<size_t>> owners(1);
  for (size_t i = 0; i < requests.size(); ++i) owners[0].push_back(i);

  // Recurse: draft j + 1 from (draft j, the layer's output for draft j's predecessor).
  const int64_t placeholder = 0;  // the runner feeds the drafts it holds on the device
  for (int64_t j = 1;; ++j) {
    std::vector<size_t> next;
    std::vector<int64_t> prev_rows;
    StepBuilder step(block_size_);
    for (size_t a = 0; a < owners.back().size(); ++a) {
      const DraftRequest& r = requests[owners.back()[a]];
      if (r.num_drafts <= j) continue;
      const int64_t pair = r.first_pair + r.num_pairs + j - 1;
      step.add(r.seq->block_table, pair, std::span<const int64_t>(&placeholder, 1), 1, 1);
      prev_rows.push_back(static_cast<int64_t>(a));
      next.push_back(owners.back()[a]);
    }
    if (next.empty()) break;
    drafts.push_back(runner_.run(StepKind::kMtpDraft, step.build(device), prev_rows));
    owners.push_back(std::move(next));
  }

  auto host = at::cat(drafts).cpu();
  const int64_t* value = host.data_ptr<int64_t>();
  for (const auto& r : requests) r.seq->draft_tokens.clear();
  for (size_t j = 0; j < owners.size(); ++j) {
    for (size_t owner : owners[j]) {
      Sequence& seq = *requests[owner].seq;
      if (static_cast<int64_t>(j) < requests[owner].num_drafts) seq.draft_tokens.push_back(*value);
      ++value;
    }
  }
}

}  // namespace mtpserve
