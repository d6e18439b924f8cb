// Continuous batching, FCFS, in the style of vLLM v1 / nano-vllm. Each step first serves the
// running sequences (decodes with their speculative drafts, and prefill chunks), preempting
// the most recently admitted ones (free and recompute) when blocks run short, then admits
// waiting sequences while the token budget, the sequence cap and free blocks allow.
//
// The scheduler never advances num_computed_tokens: after running a step the engine does
// (a prefill chunk: += num_new_tokens; a decode: += 1 + accepted drafts), appends the new
// tokens, and calls BlockManager::commit.
#pragma once

#include <cstdint>
#include <deque>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/block_manager.h"
#include "core/sequence.h"

namespace mtpserve {

// A sequence that cannot fit in the whole cache even alone; the engine fails that request.
struct SequenceTooLarge : std::runtime_error {
  SequenceTooLarge(int64_t id, const std::string& message) : std::runtime_error(message), seq_id(id) {}
  int64_t seq_id;
};

struct SchedulerConfig {
  int64_t max_tokens_per_batch = 10240;
  int64_t max_seqs_per_batch = 256;
  bool enable_chunked_prefill = true;
  int64_t num_speculative_tokens = 0;  // k: a decode step verifies up to k drafts

  void validate() const;  // throws std::invalid_argument naming the field
};

struct ScheduledSequence {
  Sequence* seq;
  // Tokens to compute from seq->num_computed_tokens on: a prefill chunk, or for a decode
  // 1 + seq->draft_tokens.size() (the last token and its drafts).
  int64_t num_new_tokens;
  bool is_prefill;  // seq->is_prefill() when scheduled
  // The step reaches the sequence's last token, so it samples the next one (false for a
  // non-final prefill chunk, whose logits are not needed).
  bool samples;
};

struct SchedulerOutput {
  std::vector<ScheduledSequence> scheduled;
  std::vector<Sequence*> preempted;  // freed this step, back at the front of the waiting queue
  bool empty() const { return scheduled.empty(); }
  int64_t num_tokens() const;
};

class Scheduler {
 public:
  // block_manager must outlive the scheduler.
  Scheduler(SchedulerConfig config, BlockManager& block_manager);

  // Queues a new sequence. The engine owns it; the pointer must stay valid until finish().
  void add(Sequence* seq);
  // Throws SequenceTooLarge when a sequence cannot fit in the whole cache even alone; it is
  // left queued, and the engine should finish() it (kAbort) and schedule again.
  SchedulerOutput schedule();
  // Frees the sequence's blocks, drops it from the queues and marks it finished.
  void finish(Sequence* seq, FinishReason reason);

  bool has_unfinished() const { return !waiting_.empty() || !running_.empty(); }
  int64_t num_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  const SchedulerConfig& config() const { return config_; }

 private:
  void schedule_running(SchedulerOutput& out, int64_t& budget);
  void schedule_waiting(SchedulerOutput& out, int64_t& budget);
  // Tokens a running sequence asks for this step within budget (0: skip it this step).
  int64_t running_demand(Sequence& seq, int64_t budget) const;
  // Makes room for seq's demand by preempting from the back of running_. Returns false when
  // seq itself had to be preempted.
  bool make_room(Sequence& seq, int64_t& num_new_tokens, SchedulerOutput& out);
  // Frees the most recently admitted running sequence and queues it first for recompute.
  void preempt_last(SchedulerOutput& out);
  static ScheduledSequence make_scheduled(Sequence& seq, int64_t num_new_tokens);
  [[noreturn]] void throw_too_large(const Sequence& seq, int64_t num_tokens) const;

  SchedulerConfig config_;
  BlockManager& blocks_;
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;  // in admission order: the back is preempted first
};

}  // namespace mtpserve
