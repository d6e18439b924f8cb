#pragma once
// Runs the forwards of a step on this rank: the target model, the MTP fill and the recursive MTP
// drafts. It is the one definition of the forward protocol: rank 0's engine calls run_target() and
// run_drafts() (which announce each forward to the tensor-parallel workers first), and every worker
// calls run_announced() with the plans it receives, so all ranks run the same forwards with the same
// collectives. Hidden states and draft tokens stay on the device between forwards. On a device with
// graphs, decode-shaped steps padded to a captured shape replay one graph each.
#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "dist/step_broadcast.h"
#include "dist/step_lockstep.h"
#include "engine/step_graphs.h"
#include "engine/step_input.h"
#include "kernels/piecewise_graph.h"
#include "model/deepseek_v3.h"
#include "model/mtp_layer.h"

namespace mtpserve {

// What capture_graphs() records: for each batch size, the target step of each query length 1..k + 1
// (decode, MTP verify) and with MTP the drafting (the fill over k + 1 rows, then 0..k - 1 recursive
// draft forwards).
struct GraphPlan {
  std::vector<int64_t> batch_sizes;
  int64_t num_speculative_tokens = 0;
  int64_t table_width = 0;      // block-table entries every sequence may need
  int64_t max_context_len = 0;  // the longest context a step may attend over
  // > 0: the target forwards of steps with prompt tokens, of up to about this many rows, and with MTP their fills,
  // replay piecewise graphs (kernels/piecewise_graph.h), one per padded row count, all captured at start-up.
  // On one rank only: under tensor parallelism they run eagerly.
  int64_t max_prefill_rows = 0;
};

class ModelRunner {
 public:
  // `mtp` and `mtp_cache` may be absent (no speculative decoding). `lockstep`: on the leader of an attention
  // group under data-parallel attention with expert parallelism, where run_drafts() agrees with the other
  // groups on the number of MTP forwards.
  ModelRunner(const DeepSeekV3& target, std::vector<at::Tensor> caches, const MtpLayer* mtp = nullptr,
              at::Tensor mtp_cache = {}, const StepLockstep* lockstep = nullptr);

  // Captures the plan's graphs (rank 0 of a tensor-parallel group has its workers capture the same);
  // returns false (capturing nothing) where the device has no graphs or the experts are split across
  // ranks (their all-to-alls are sized on the host).
  bool capture_graphs(const GraphPlan& plan);
  size_t num_graphs() const { return (graphs_ ? graphs_->size() : 0) + prefill_graphs_.size() + fill_graphs_.size(); }
  // Frees the graphs once no step follows: NCCL does not destroy a communicator while a graph that
  // holds its collectives lives, so a group's shutdown would wait for them.
  void release_graphs() {
    fill_graphs_.clear();
    prefill_graphs_.clear();
    graphs_.reset();
  }
  // The padded shape of a decode step of `seqs` sequences feeding at most `query_len` rows each,
  // when a graph holds it (the smallest that does).
  std::optional<StepShape> target_shape(int64_t seqs, int64_t query_len) const;
  // The padded shapes (fill, draft forwards) of MTP drafting for `seqs` sequences of the last target
  // step (when it replayed a graph) with `draft_forwards` recursive forwards, when a graph has them.
  std::optional<std::pair<StepShape, StepShape>> draft_shapes(int64_t seqs, int64_t draft_forwards) const;
  // The padded shape of `draft_forwards` recursive draft forwards for `seqs` sequences whose fill has no such shape
  // (a step with prefill chunks, a catch-up), when a graph has them.
  std::optional<StepShape> recursion_shape(int64_t seqs, int64_t draft_forwards) const;

  // The target model over `input`; returns the logits of its sample rows.
  at::Tensor run_target(const StepInput& input);
  // The MTP forwards of a step: forwards[0] is the fill (its source rows index the last target
  // forward's rows, and with `fill_reads_stash` negative ones the stash), then the recursive draft
  // forwards (source rows index the previous forward's sampled rows). Returns every forward's drafts
  // (argmax of its sampled rows), concatenated. An unshaped fill replays the piecewise graph of its row count where
  // there is one, and shaped draft forwards after it replay the graph of the draft forwards alone. Under lockstep
  // it runs as many forwards as the group that runs most, the missing ones empty, and may be given none at all.
  at::Tensor run_drafts(std::vector<StepInput> forwards, bool fill_reads_stash = false);
  // A target forward of no tokens: an idle group's part in a lockstep step (then run_drafts({}) with MTP).
  void run_empty_target();

  // The stash of target hidden states whose MTP fill was deferred (HiddenStash maps its rows).
  void allocate_stash(int64_t rows);
  // Copies the last target forward's rows target_rows[i] to stash rows stash_rows[i].
  void stash_hidden(const std::vector<int64_t>& target_rows, const std::vector<int64_t>& stash_rows);
  // The fill's source row that reads stash row `row`.
  static int64_t stash_source(int64_t row) { return -1 - row; }
  // Tensor-parallel workers: what rank 0 announced (a forward, a graph replay, or the graphs to capture).
  void run_announced(const StepMessage& message);

  // Logits of `rows` of the last target forward (rank 0 alone: no collective is announced).
  at::Tensor target_logits(const at::Tensor& rows) const {
    return target_.logits(target_hidden_.index_select(0, rows));
  }

  const at::Device& device() const { return device_; }
  bool has_mtp() const { return mtp_ != nullptr; }
  // What this device pads a forward run eagerly to (KernelOps::eager_rows), for the StepBuilders of its forwards.
  kernels::EagerRowsFn eager_rows() const { return eager_rows_; }

 private:
  bool leads_group() const;  // rank 0 of a tensor-parallel group
  // Rank 0 of a tensor-parallel group: tells the workers what comes next.
  void announce(StepKind kind, std::span<const int64_t> wire = {}) const;
  // Replays the graph of `key` over `inputs` (announced first); returns its outputs.
  const std::vector<at::Tensor>& replay(GraphKey key, std::span<const StepInput> inputs);
  at::Tensor forward(StepKind kind, const DeviceStep& step);
  at::Tensor run_mtp(const DeviceStep& step, const at::Tensor& tokens, const at::Tensor& previous_hidden);
  // The hidden states a catch-up fill reads: rows >= 0 of the last target forward, rows < 0 of the stash.
  at::Tensor catch_up_sources(const at::Tensor& rows) const;
  void capture_batch(int64_t seqs);
  void allocate_prefill_buffers();
  // Whether `graphs` has the piecewise graph of the input's row count and the input fits their input buffer.
  bool fits_piecewise(const std::map<int64_t, std::unique_ptr<kernels::PiecewiseGraph>>& graphs,
                      const StepInput& input) const;
  // The piecewise graphs of every row count that steps with prompt tokens are padded to: the target forward's and,
  // with MTP, the fill's.
  void capture_prefill_graphs();
  // The target forward of a step with prompt tokens through the piecewise graph of its row count (one that
  // fits_piecewise); returns the logits of its sample rows.
  at::Tensor run_prefill_graph(const StepInput& input);
  // The MTP fill over `input` through the piecewise graph of its row count; returns its drafts, as run_mtp().
  at::Tensor run_fill_graph(const StepInput& input, bool reads_stash);
  // The device view of a placeholder input of `rows` one-row sequences that write nothing, in prefill_input_.
  DeviceStep placeholder_step(int64_t rows);
  // The device view of `input` uploaded into prefill_input_, where the piecewise graphs read their steps.
  DeviceStep upload_piecewise(const StepInput& input);
  std::unique_ptr<kernels::PiecewiseGraph> capture_prefill(int64_t rows);
  std::unique_ptr<kernels::PiecewiseGraph> capture_fill(int64_t rows);
  // The smallest batch bucket of at least `seqs` sequences that has the graph of this key's shape.
  std::optional<int64_t> smallest_bucket(int64_t seqs, int64_t query_len, int64_t draft_forwards) const;
  int64_t num_speculative_tokens() const;
  StepShape shape_of(int64_t seqs, int64_t query_len, int64_t samples_per_seq) const;

  const DeepSeekV3& target_;
  std::vector<at::Tensor> caches_;
  const MtpLayer* mtp_;
  at::Tensor mtp_cache_;
  const StepLockstep* lockstep_;
  at::Device device_;
  kernels::EagerRowsFn eager_rows_;
  int max_threads_;  // intra-op threads for large steps on the CPU
  at::Tensor target_hidden_;  // [tokens, hidden] of the last target forward
  at::Tensor mtp_hidden_;     // [samples, hidden] of the last MTP forward
  at::Tensor drafts_;         // [samples] argmax tokens of the last MTP forward
  at::Tensor stash_;          // [stash rows, hidden]: target hidden states of deferred fills
  std::optional<StepGraphs> graphs_;
  // [largest batch * (k + 1), or max_prefill_rows, hidden]: the graphed target steps' hidden states
  at::Tensor graph_hidden_;
  std::map<int64_t, std::unique_ptr<kernels::PiecewiseGraph>> prefill_graphs_;  // by row count
  at::Tensor prefill_input_;  // the step input the piecewise graphs read (int64 words)
  at::Tensor prefill_queries_, prefill_outputs_;  // what their attention calls read and write
  // The MTP fill after a step with prompt tokens, by row count: every row goes through the layer (the graph's shapes
  // follow the row count alone), and the sampled rows are taken from its output afterwards.
  std::map<int64_t, std::unique_ptr<kernels::PiecewiseGraph>> fill_graphs_;
  at::Tensor fill_sources_, fill_hidden_;  // [max_prefill_rows, hidden]: the fill graphs' hidden states in and out
  // [largest batch] and [largest batch, hidden]: an unshaped fill's drafts and hidden states, where the graphs of the
  // draft forwards alone read them
  at::Tensor recursion_drafts_, recursion_hidden_;
  GraphPlan plan_;
  std::optional<GraphKey> last_target_graph_;  // the graph the last target step replayed
};

}  // namespace mtpserve
