#include "engine/mtp_drafter.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <tuple>
#include <utility>

namespace mtpserve {

namespace {

// The fill: the stashed pairs and every newly computed pair of each request, sampling its last one.
StepInput fill_input(const std::vector<DraftRequest>& requests, int64_t block_size, std::optional<StepShape> shape,
                     kernels::EagerRowsFn eager_rows) {
  StepBuilder fill(block_size, shape, eager_rows);
  std::vector<int64_t> sources;
  for (const auto& r : requests) {
    const int64_t first = r.first_pair - r.stashed.count;
    const auto tokens = std::span<const int64_t>(r.seq->tokens).subspan(first + 1, r.stashed.count + r.num_pairs);
    sources.clear();
    for (int64_t i = 0; i < r.stashed.count; ++i) sources.push_back(ModelRunner::stash_source(r.stashed.first_row + i));
    for (int64_t i = 0; i < r.num_pairs; ++i) sources.push_back(r.hidden_row + i);
    fill.add(r.seq->block_table, first, tokens, 1, /*rope_offset=*/1, sources);
  }
  return fill.build();
}

bool catches_up(const std::vector<DraftRequest>& requests) {
  return std::ranges::any_of(requests, [](const DraftRequest& r) { return r.stashed.count > 0; });
}

// Draft j + 1 of every request from (draft j, the layer's output for draft j's predecessor): row a
// of each forward belongs to request a; requests that want no more drafts are padding there.
StepInput draft_input(const std::vector<DraftRequest>& requests, int64_t j, int64_t block_size,
                      std::optional<StepShape> shape, kernels::EagerRowsFn eager_rows) {
  const int64_t placeholder = 0;  // the runner feeds the drafts it holds on the device
  StepBuilder step(block_size, shape, eager_rows);
  for (size_t a = 0; a < requests.size(); ++a) {
    const DraftRequest& r = requests[a];
    if (r.num_drafts <= j) {
      step.add_padding();
      continue;
    }
    const int64_t pair = r.first_pair + r.num_pairs + j - 1;
    step.add(r.seq->block_table, pair, std::span<const int64_t>(&placeholder, 1), 1, 1, static_cast<int64_t>(a));
  }
  return step.build();
}

}  // namespace

DraftForwards MtpDrafter::forwards(const std::vector<DraftRequest>& requests) const {
  if (requests.empty()) return {};
  int64_t most = 0;
  for (const auto& r : requests) most = std::max(most, r.num_drafts);
  const int64_t recursions = std::max<int64_t>(0, most - 1);
  const bool catch_up = catches_up(requests);
  std::optional<StepShape> fill_shape, draft_shape;  // padded to a captured graph's shapes where one fits
  // A catch-up's fill has more rows per sequence than any graph's, as has a fill after a step with prefill
  // chunks: it runs eagerly, and its draft forwards may still replay a graph.
  const auto seqs = static_cast<int64_t>(requests.size());
  if (auto shapes = catch_up ? std::nullopt : runner_.draft_shapes(seqs, recursions)) {
    std::tie(fill_shape, draft_shape) = *shapes;
  } else {
    draft_shape = runner_.recursion_shape(seqs, recursions);
  }
  // Run eagerly, every forward is padded alike: each samples eager_rows(requests) rows, one per request first.
  const kernels::EagerRowsFn eager_rows = runner_.eager_rows();
  DraftForwards drafting{{fill_input(requests, block_size_, fill_shape, eager_rows)}, catch_up};
  for (int64_t j = 1; j <= recursions; ++j) {
    drafting.forwards.push_back(draft_input(requests, j, block_size_, draft_shape, eager_rows));
  }
  return drafting;
}

void MtpDrafter::run(const std::vector<DraftRequest>& requests, DraftForwards drafting) const {
  if (requests.empty()) {
    runner_.run_drafts({});  // under lockstep the other groups' drafting still needs this rank
    return;
  }
  const std::vector<StepInput>& forwards = drafting.forwards;
  const int64_t fill_rows = forwards[0].sampled_rows(), rows = forwards.size() > 1 ? forwards[1].sampled_rows() : 0;
  auto host = runner_.run_drafts(std::move(drafting.forwards), drafting.catch_up).cpu();
  // Draft j + 1 of request a is row a of forward j's drafts; the fill may sample more rows than the others.
  const int64_t* drafts = host.data_ptr<int64_t>();
  for (size_t a = 0; a < requests.size(); ++a) {
    auto& out = requests[a].seq->draft_tokens;
    out.clear();
    for (int64_t j = 0; j < requests[a].num_drafts; ++j) {
      out.push_back(drafts[(j == 0 ? 0 : fill_rows + (j - 1) * rows) + static_cast<int64_t>(a)]);
    }
  }
}

}  // namespace mtpserve
