#include "engine/model_runner.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <stdexcept>

#include "engine/host_columns.h"
#include "kernels/kernel_ops.h"

namespace mtpserve {

namespace {

// Steps with fewer tokens than this run on one intra-op thread: measured on the 2-core CI
// machine, a fork/join across cores made decode and verify steps of up to 96 tokens slower.
constexpr int64_t kMinTokensForThreads = 512;

StepKind mtp_kind(size_t forward, bool fill_reads_stash = false) {
  if (forward > 0) return StepKind::kMtpDraft;
  return fill_reads_stash ? StepKind::kMtpCatchUp : StepKind::kMtpFill;
}

// kCaptureGraphs' payload: k, table width, max context len, then the batch sizes.
std::vector<int64_t> plan_wire(const GraphPlan& plan) {
  std::vector<int64_t> wire{plan.num_speculative_tokens, plan.table_width, plan.max_context_len};
  wire.insert(wire.end(), plan.batch_sizes.begin(), plan.batch_sizes.end());
  return wire;
}

GraphPlan plan_from_wire(std::span<const int64_t> wire) {
  if (wire.size() < 3) throw std::invalid_argument("graph plan message: too short");
  return {{wire.begin() + 3, wire.end()}, wire[0], wire[1], wire[2]};
}

// kReplayGraph's payload: the key, then each input's wire preceded by its length.
std::vector<int64_t> replay_wire(GraphKey key, std::span<const StepInput> inputs) {
  std::vector<int64_t> wire{key.seqs, key.query_len, key.draft_forwards};
  for (const auto& input : inputs) {
    wire.push_back(static_cast<int64_t>(input.wire.size()));
    wire.insert(wire.end(), input.wire.begin(), input.wire.end());
  }
  return wire;
}

std::pair<GraphKey, std::vector<StepInput>> replay_from_wire(std::span<const int64_t> wire) {
  if (wire.size() < 3) throw std::invalid_argument("graph replay message: too short");
  std::vector<StepInput> inputs;
  for (size_t at = 3; at < wire.size();) {
    const auto size = static_cast<size_t>(wire[at]);
    if (at + 1 + size > wire.size()) throw std::invalid_argument("graph replay message: a forward overruns it");
    inputs.push_back(step_input_from_wire(wire.subspan(at + 1, size)));
    at += 1 + size;
  }
  return {GraphKey{wire[0], wire[1], wire[2]}, std::move(inputs)};
}

}  // namespace

ModelRunner::ModelRunner(const DeepSeekV3& target, std::vector<at::Tensor> caches, const MtpLayer* mtp,
                         at::Tensor mtp_cache, const StepLockstep* lockstep)
    : target_(target),
      caches_(std::move(caches)),
      mtp_(mtp),
      mtp_cache_(std::move(mtp_cache)),
      lockstep_(lockstep),
      device_(target.embedding().device()),
      eager_rows_(kernels::ops_for(device_).eager_rows),
      max_threads_(at::get_num_threads()) {
  if (mtp_ != nullptr && !mtp_cache_.defined()) throw std::invalid_argument("an MTP layer needs its latent cache");
}

at::Tensor ModelRunner::run_target(const StepInput& input) {
  const std::span<const StepInput> inputs(&input, 1);
  if (input.shape) return replay({input.shape->seqs, input.shape->query_len}, inputs)[0];
  last_target_graph_.reset();
  announce(StepKind::kTarget, input.wire);
  if (fits_piecewise(prefill_graphs_, input)) return run_prefill_graph(input);
  return forward(StepKind::kTarget, device_steps(upload(inputs, device_), inputs)[0]);
}

bool ModelRunner::fits_piecewise(const std::map<int64_t, std::unique_ptr<kernels::PiecewiseGraph>>& graphs,
                                 const StepInput& input) const {
  return graphs.contains(input.wire[0]) && static_cast<int64_t>(input.packed().size()) <= prefill_input_.numel();
}

at::Tensor ModelRunner::run_prefill_graph(const StepInput& input) {
  const DeviceStep step = upload_piecewise(input);
  prefill_graphs_.at(input.wire[0])->replay(step.attention);
  target_hidden_ = graph_hidden_;
  return target_.logits(target_hidden_.index_select(0, step.sample_rows));
}

// The fill's source rows lie past its sample rows in its input, where they move with the sample count: they are
// gathered before the replay into fill_sources_, which the graph reads.
at::Tensor ModelRunner::run_fill_graph(const StepInput& input, bool reads_stash) {
  const DeviceStep step = upload_piecewise(input);
  const int64_t rows = step.token_ids.size(0);
  fill_sources_.narrow(0, 0, rows).copy_(reads_stash ? catch_up_sources(step.source_rows)
                                                     : target_hidden_.index_select(0, step.source_rows));
  fill_graphs_.at(input.wire[0])->replay(step.attention);
  mtp_hidden_ = fill_hidden_.index_select(0, step.sample_rows);
  drafts_ = mtp_->logits(mtp_hidden_).argmax(-1);
  return drafts_;
}

// Pieces are recorded over one-row sequences that write nothing: they read the step's token ids, positions and
// slots alone, which lie first in its input whatever its sequences.
DeviceStep ModelRunner::placeholder_step(int64_t rows) {
  StepBuilder builder(0);
  for (int64_t i = 0; i < rows; ++i) builder.add_padding();
  return upload_piecewise(builder.build());
}

DeviceStep ModelRunner::upload_piecewise(const StepInput& input) {
  const std::span<const StepInput> inputs(&input, 1);
  return device_steps(upload_into(prefill_input_, inputs), inputs)[0];
}

std::unique_ptr<kernels::PiecewiseGraph> ModelRunner::capture_prefill(int64_t rows) {
  const DeviceStep step = placeholder_step(rows);
  const auto body = [&] {
    graph_hidden_.narrow(0, 0, rows).copy_(target_.forward(step.token_ids, step.positions, caches_, step.attention));
  };
  return kernels::ops_for(device_).capture_piecewise(body, graphs_->pool_owner(), prefill_queries_, prefill_outputs_);
}

std::unique_ptr<kernels::PiecewiseGraph> ModelRunner::capture_fill(int64_t rows) {
  const DeviceStep step = placeholder_step(rows);
  const auto body = [&] {
    fill_hidden_.narrow(0, 0, rows).copy_(mtp_->forward(step.token_ids, fill_sources_.narrow(0, 0, rows),
                                                        step.positions, target_.rope(), mtp_cache_, step.attention));
  };
  return kernels::ops_for(device_).capture_piecewise(body, graphs_->pool_owner(), prefill_queries_, prefill_outputs_);
}

void ModelRunner::allocate_prefill_buffers() {
  const ModelConfig& c = target_.config();
  const int64_t rows = plan_.max_prefill_rows, seqs = plan_.batch_sizes.front() + 1;
  const auto options = target_.embedding().options();
  prefill_queries_ = at::empty({rows, c.num_attention_heads, c.kv_lora_rank + c.qk_rope_head_dim}, options);
  prefill_outputs_ = at::empty({rows, c.num_attention_heads, c.kv_lora_rank}, options);
  // A step's packed input: 4 words per row, its sample rows (at most one per row), block tables and lengths;
  // the placeholder of capture_prefill() has one sequence per row.
  const int64_t words = std::max(10 * rows, 5 * rows + seqs * (plan_.table_width + 4)) + 2;
  prefill_input_ = at::empty({words}, options.dtype(at::kLong));
  if (num_speculative_tokens() > 0) {
    fill_sources_ = at::zeros({rows, c.hidden_size}, options);  // what recording reads: finite, unlike empty()
    fill_hidden_ = at::empty({rows, c.hidden_size}, options);
  }
}

bool ModelRunner::leads_group() const { return target_.tp().enabled() && target_.tp().rank() == 0; }

void ModelRunner::announce(StepKind kind, std::span<const int64_t> wire) const {
  if (leads_group()) send_step(target_.tp(), kind, wire);
}

const std::vector<at::Tensor>& ModelRunner::replay(GraphKey key, std::span<const StepInput> inputs) {
  if (leads_group()) send_step(target_.tp(), StepKind::kReplayGraph, replay_wire(key, inputs));  // one rank builds no message
  if (key.draft_forwards > 0 && key.query_len == 0) {  // after an unshaped fill, on every rank
    const int64_t rows = std::min(drafts_.size(0), key.seqs);
    recursion_drafts_.narrow(0, 0, rows).copy_(drafts_.narrow(0, 0, rows));
    recursion_hidden_.narrow(0, 0, rows).copy_(mtp_hidden_.narrow(0, 0, rows));
  }
  const auto& outputs = graphs_->replay(key, inputs);
  if (key.draft_forwards < 0) {
    target_hidden_ = graph_hidden_;
    last_target_graph_ = key;
  }
  return outputs;
}

void ModelRunner::run_empty_target() { run_target(StepBuilder(0).build()); }

at::Tensor ModelRunner::run_drafts(std::vector<StepInput> forwards, bool fill_reads_stash) {
  if (lockstep_) {
    const int64_t most = lockstep_->agree({static_cast<int64_t>(forwards.size())})[0];
    while (static_cast<int64_t>(forwards.size()) < most) forwards.push_back(StepBuilder(0).build());
  }
  if (forwards.empty()) return at::empty({0}, at::kLong);
  const auto draft_forwards = static_cast<int64_t>(forwards.size()) - 1;
  if (forwards[0].shape) {
    return replay({forwards[0].shape->seqs, forwards[0].shape->query_len, draft_forwards}, forwards)[0];
  }
  std::vector<at::Tensor> drafts;
  const size_t graphed_fill = fits_piecewise(fill_graphs_, forwards[0]) ? 1 : 0;
  if (graphed_fill) {
    announce(mtp_kind(0, fill_reads_stash), forwards[0].wire);
    drafts.push_back(run_fill_graph(forwards[0], fill_reads_stash));
  }
  const size_t unshaped = draft_forwards > 0 && forwards[1].shape ? 1 : forwards.size();
  const auto eager = std::span<const StepInput>(forwards).subspan(graphed_fill, unshaped - graphed_fill);
  const auto steps = eager.empty() ? std::vector<DeviceStep>{} : device_steps(upload(eager, device_), eager);
  for (size_t j = 0; j < eager.size(); ++j) {
    // Announced one at a time: a worker must meet each forward's collectives in rank 0's order.
    const StepKind kind = mtp_kind(graphed_fill + j, fill_reads_stash);
    announce(kind, eager[j].wire);
    drafts.push_back(forward(kind, steps[j]));
  }
  if (unshaped < forwards.size()) {
    drafts.push_back(replay({forwards[1].shape->seqs, 0, draft_forwards}, std::span(forwards).subspan(1))[0]);
  }
  return at::cat(drafts);
}

void ModelRunner::allocate_stash(int64_t rows) {
  stash_ = at::empty({rows, target_.config().hidden_size}, target_.embedding().options());
}

void ModelRunner::stash_hidden(const std::vector<int64_t>& target_rows, const std::vector<int64_t>& stash_rows) {
  if (target_rows.empty()) return;
  const auto rows = to_device<int64_t>({&target_rows, &stash_rows}, at::kLong, device_);
  stash_.index_copy_(0, rows[1], target_hidden_.index_select(0, rows[0]));
}

at::Tensor ModelRunner::catch_up_sources(const at::Tensor& rows) const {
  if (!stash_.defined()) throw std::runtime_error("an MTP catch-up fill needs the hidden-state stash (allocate_stash)");
  const auto from_target = target_hidden_.index_select(0, rows.clamp_min(0));
  const auto from_stash = stash_.index_select(0, (rows.neg() - 1).clamp_min(0));
  return at::where(rows.lt(0).unsqueeze(1), from_stash, from_target);
}

void ModelRunner::run_announced(const StepMessage& message) {
  if (message.kind == StepKind::kCaptureGraphs) {
    if (!capture_graphs(plan_from_wire(message.wire))) {
      throw std::runtime_error("rank 0 captured CUDA graphs but this rank's device cannot");
    }
    return;
  }
  if (message.kind == StepKind::kReplayGraph) {
    const auto [key, inputs] = replay_from_wire(message.wire);
    if (!graphs_ || !graphs_->has(key)) throw std::runtime_error("rank 0 replayed a graph this rank did not capture");
    replay(key, inputs);
    return;
  }
  const StepInput input = step_input_from_wire(message.wire);
  const std::span<const StepInput> inputs(&input, 1);
  forward(message.kind, device_steps(upload(inputs, device_), inputs)[0]);
}

at::Tensor ModelRunner::forward(StepKind kind, const DeviceStep& step) {
  if (kind == StepKind::kTarget) {
    // The thread count chosen for the target forward holds through the step's MTP forwards.
    at::set_num_threads(step.token_ids.size(0) >= kMinTokensForThreads ? max_threads_ : 1);
    target_hidden_ = target_.forward(step.token_ids, step.positions, caches_, step.attention);
    return target_.logits(target_hidden_.index_select(0, step.sample_rows));
  }
  if (mtp_ == nullptr) throw std::runtime_error("rank 0 drafts with MTP but this rank has no MTP layer");
  if (kind == StepKind::kMtpFill) {
    return run_mtp(step, step.token_ids, target_hidden_.index_select(0, step.source_rows));
  }
  if (kind == StepKind::kMtpCatchUp) return run_mtp(step, step.token_ids, catch_up_sources(step.source_rows));
  if (kind == StepKind::kMtpDraft) {
    return run_mtp(step, drafts_.index_select(0, step.source_rows), mtp_hidden_.index_select(0, step.source_rows));
  }
  throw std::runtime_error("unknown step kind " + std::to_string(static_cast<int64_t>(kind)));
}

// Only the sampled rows' outputs are read (a fill samples each sequence's last row): the other rows write their
// cache rows alone, which skips their attention, MoE and norms. Where every row is sampled, the sampled rows are
// the rows in order.
at::Tensor ModelRunner::run_mtp(const DeviceStep& step, const at::Tensor& tokens, const at::Tensor& previous_hidden) {
  const OutputRows sampled{step.sample_rows, &step.sampled_attention};
  const bool every_row = step.sample_rows.size(0) == step.token_ids.size(0);
  mtp_hidden_ = mtp_->forward(tokens, previous_hidden, step.positions, target_.rope(), mtp_cache_, step.attention,
                              every_row ? nullptr : &sampled);
  drafts_ = mtp_->logits(mtp_hidden_).argmax(-1);
  return drafts_;
}

bool ModelRunner::capture_graphs(const GraphPlan& plan) {
  const auto capture = kernels::ops_for(device_).capture_graph;
  if (capture == nullptr || target_.tp().expert_parallel() || plan.batch_sizes.empty()) return false;
  announce(StepKind::kCaptureGraphs, plan_wire(plan));
  graphs_.emplace(capture, device_);
  plan_ = plan;
  std::ranges::sort(plan_.batch_sizes, std::greater<>());
  const int64_t largest = plan_.batch_sizes.front();
  const bool prefill = plan_.max_prefill_rows > 0 && !target_.tp().enabled() && eager_rows_ != nullptr &&
                       kernels::ops_for(device_).capture_piecewise != nullptr;
  // Eager steps' rows are padded to eager_rows() counts: the piecewise graphs' row counts.
  plan_.max_prefill_rows = prefill ? eager_rows_(plan_.max_prefill_rows) : 0;
  const int64_t hidden_rows = std::max(largest * (num_speculative_tokens() + 1), plan_.max_prefill_rows);
  graph_hidden_ = at::empty({hidden_rows, target_.config().hidden_size}, target_.embedding().options());
  if (prefill) allocate_prefill_buffers();
  recursion_drafts_ = at::zeros({largest}, target_.embedding().options().dtype(at::kLong));
  recursion_hidden_ = at::zeros({largest, target_.config().hidden_size}, target_.embedding().options());
  for (int64_t seqs : plan_.batch_sizes) capture_batch(seqs);  // largest first: they share one pool
  if (prefill) capture_prefill_graphs();
  return true;
}

// Recorded at start-up, so that serving never stops to record one: a recording costs about three eager steps, and
// while it records cuBLAS chooses a kernel for each new GEMM shape on the host.
void ModelRunner::capture_prefill_graphs() {
  std::vector<int64_t> counts;
  for (int64_t rows = 1; rows <= plan_.max_prefill_rows; rows = eager_rows_(rows) + 1) {
    counts.push_back(eager_rows_(rows));
  }
  for (auto rows = counts.rbegin(); rows != counts.rend(); ++rows) {  // largest first, as the decode graphs
    prefill_graphs_.emplace(*rows, capture_prefill(*rows));
    if (num_speculative_tokens() > 0) fill_graphs_.emplace(*rows, capture_fill(*rows));
  }
}

int64_t ModelRunner::num_speculative_tokens() const { return mtp_ ? plan_.num_speculative_tokens : 0; }

StepShape ModelRunner::shape_of(int64_t seqs, int64_t query_len, int64_t samples) const {
  return {seqs, query_len, samples, plan_.table_width, plan_.max_context_len};
}

// The target step for every query length 1..k + 1 (a step's k may be below the configured one), the
// drafting for every number of recursive forwards 0..k - 1, its fill padded to k + 1 rows, and the recursive
// forwards alone for every number 1..k - 1: the fill of a step with prefill chunks fits no graph of these (it
// replays a piecewise one, or runs eagerly), and its draft forwards, run eagerly too, cost an H200 0.5 ms each with
// the embedded model.
void ModelRunner::capture_batch(int64_t seqs) {
  const int64_t k = num_speculative_tokens();
  for (int64_t q = 1; q <= k + 1; ++q) {
    graphs_->capture({seqs, q}, {StepBuilder(0, shape_of(seqs, q, q)).build()}, [&](const auto& steps) {
      auto logits = forward(StepKind::kTarget, steps[0]);
      graph_hidden_.narrow(0, 0, seqs * q).copy_(target_hidden_);  // where every drafting graph reads it
      return std::vector<at::Tensor>{logits};
    });
  }
  target_hidden_ = graph_hidden_;
  for (int64_t recursions = 0; recursions < k; ++recursions) {
    std::vector<StepInput> forwards{StepBuilder(0, shape_of(seqs, k + 1, 1)).build()};
    for (int64_t j = 0; j < recursions; ++j) forwards.push_back(StepBuilder(0, shape_of(seqs, 1, 1)).build());
    graphs_->capture({seqs, k + 1, recursions}, forwards, [&](const auto& steps) {
      std::vector<at::Tensor> drafts;
      for (size_t j = 0; j < steps.size(); ++j) drafts.push_back(forward(mtp_kind(j), steps[j]));
      return std::vector<at::Tensor>{at::cat(drafts)};
    });
  }
  for (int64_t recursions = 1; recursions < k; ++recursions) {
    const std::vector<StepInput> forwards(recursions, StepBuilder(0, shape_of(seqs, 1, 1)).build());
    graphs_->capture({seqs, 0, recursions}, forwards, [&](const auto& steps) {
      drafts_ = recursion_drafts_.narrow(0, 0, seqs);  // where replay() puts the unshaped fill's
      mtp_hidden_ = recursion_hidden_.narrow(0, 0, seqs);
      std::vector<at::Tensor> drafts;
      for (const auto& step : steps) drafts.push_back(forward(StepKind::kMtpDraft, step));
      return std::vector<at::Tensor>{at::cat(drafts)};
    });
  }
}

std::optional<int64_t> ModelRunner::smallest_bucket(int64_t seqs, int64_t query_len, int64_t draft_forwards) const {
  if (!graphs_) return std::nullopt;
  // plan_.batch_sizes is descending, so from its back the first size that holds `seqs` and has this graph is the
  // smallest: one lookup where every size that holds it took one (21 a step at batch 1, in a map of 9 graphs a size
  // at k = 3), on the host's critical path before each launch.
  for (auto size = plan_.batch_sizes.rbegin(); size != plan_.batch_sizes.rend(); ++size) {
    if (*size >= seqs && graphs_->has({*size, query_len, draft_forwards})) return *size;
  }
  return std::nullopt;
}

std::optional<StepShape> ModelRunner::target_shape(int64_t seqs, int64_t query_len) const {
  const auto size = smallest_bucket(seqs, query_len, -1);
  return size ? std::optional(shape_of(*size, query_len, query_len)) : std::nullopt;
}

std::optional<StepShape> ModelRunner::recursion_shape(int64_t seqs, int64_t draft_forwards) const {
  if (lockstep_ != nullptr || draft_forwards == 0) return std::nullopt;
  const auto size = smallest_bucket(seqs, 0, draft_forwards);
  return size ? std::optional(shape_of(*size, 1, 1)) : std::nullopt;
}

std::optional<std::pair<StepShape, StepShape>> ModelRunner::draft_shapes(int64_t seqs, int64_t draft_forwards) const {
  if (!graphs_ || !last_target_graph_) return std::nullopt;
  const int64_t fill_rows = num_speculative_tokens() + 1;
  const GraphKey key{last_target_graph_->seqs, fill_rows, draft_forwards};
  if (seqs > key.seqs || !graphs_->has(key)) return std::nullopt;
  return std::pair{shape_of(key.seqs, fill_rows, 1), shape_of(key.seqs, 1, 1)};
}

}  // namespace mtpserve
