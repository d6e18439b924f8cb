#include "core/scheduler.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace mtpserve {

namespace {

void require(bool ok, const char* field, int64_t value, const char* expected) {
  if (!ok) {
    throw std::invalid_argument(std::string("SchedulerConfig.") + field + " must be " + expected + ", got " +
                                std::to_string(value));
  }
}

}  // namespace

void SchedulerConfig::validate() const {
  require(max_tokens_per_batch >= 1, "max_tokens_per_batch", max_tokens_per_batch, ">= 1");
  require(max_seqs_per_batch >= 1, "max_seqs_per_batch", max_seqs_per_batch, ">= 1");
  require(num_speculative_tokens >= 0, "num_speculative_tokens", num_speculative_tokens, ">= 0");
}

int64_t SchedulerOutput::num_tokens() const {
  int64_t total = 0;
  for (const ScheduledSequence& s : scheduled) total += s.num_new_tokens;
  return total;
}

Scheduler::Scheduler(SchedulerConfig config, BlockManager& block_manager)
    : config_(config), blocks_(block_manager) {
  config_.validate();
}

void Scheduler::add(Sequence* seq) {
  if (seq == nullptr) throw std::invalid_argument("Scheduler::add: null sequence");
  if (seq->status != SequenceStatus::kWaiting || !seq->block_table.empty()) {
    throw std::invalid_argument("Scheduler::add: sequence " + std::to_string(seq->id) +
                                " is already running or finished; add each sequence once");
  }
  seq->params.validate();
  waiting_.push_back(seq);
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  int64_t budget = config_.max_tokens_per_batch;
  schedule_running(out, budget);
  // A step that had to preempt is short of blocks: admitting more now would only thrash.
  if (out.preempted.empty()) schedule_waiting(out, budget);
  return out;
}

void Scheduler::schedule_running(SchedulerOutput& out, int64_t& budget) {
  // Index loop: preemption shrinks running_ from the back while we walk it from the front.
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Sequence& seq = *running_[i];
    int64_t n = running_demand(seq, budget);
    if (n == 0) continue;
    if (!make_room(seq, n, out)) break;  // seq was the back of running_: nothing follows it
    blocks_.reserve(seq, n);
    out.scheduled.push_back(make_scheduled(seq, n));
    budget -= n;
  }
}

int64_t Scheduler::running_demand(Sequence& seq, int64_t budget) const {
  const int64_t remaining = seq.num_tokens() - seq.num_computed_tokens;
  if (remaining <= 0) {
    throw std::runtime_error("sequence " + std::to_string(seq.id) +
                             " has no uncomputed token: append the sampled token before scheduling again");
  }
  if (seq.is_prefill()) {
    if (config_.enable_chunked_prefill) return std::min(remaining, budget);
    // Whole prompts only; one larger than any batch runs when it has the batch to itself.
    return remaining <= budget || budget == config_.max_tokens_per_batch ? remaining : 0;
  }
  const auto num_drafts = static_cast<int64_t>(seq.draft_tokens.size());
  if (num_drafts > config_.num_speculative_tokens) {
    throw std::runtime_error("sequence " + std::to_string(seq.id) + " has " + std::to_string(num_drafts) +
                             " draft tokens but num_speculative_tokens is " +
                             std::to_string(config_.num_speculative_tokens));
  }
  // Drafts are optional work: drop the ones the budget cannot take.
  if (num_drafts > budget - 1) seq.draft_tokens.resize(budget - 1);
  return 1 + static_cast<int64_t>(seq.draft_tokens.size());
}

bool Scheduler::make_room(Sequence& seq, int64_t& num_new_tokens, SchedulerOutput& out) {
  while (!blocks_.can_reserve(seq, num_new_tokens)) {
    if (running_.back() != &seq) {
      preempt_last(out);
      continue;
    }
    // seq is the most recently admitted left: shedding its drafts beats a recompute.
    if (!seq.draft_tokens.empty()) {
      seq.draft_tokens.pop_back();
      num_new_tokens = 1 + static_cast<int64_t>(seq.draft_tokens.size());
      continue;
    }
    // Alone, every other block is free or evictable: it can never fit.
    if (running_.size() == 1) throw_too_large(seq, seq.num_computed_tokens + num_new_tokens);
    preempt_last(out);
    return false;
  }
  return true;
}

void Scheduler::preempt_last(SchedulerOutput& out) {
  Sequence* victim = running_.back();
  running_.pop_back();
  // Recompute policy: it re-enters with prompt + outputs as its prompt; the prefix cache
  // may still hold some of its blocks.
  blocks_.free(*victim);
  victim->draft_tokens.clear();
  victim->status = SequenceStatus::kWaiting;
  waiting_.push_front(victim);
  out.preempted.push_back(victim);
}

void Scheduler::schedule_waiting(SchedulerOutput& out, int64_t& budget) {
  while (!waiting_.empty() && budget > 0 && num_running() < config_.max_seqs_per_batch) {
    Sequence& seq = *waiting_.front();
    const int64_t remaining = seq.num_tokens() - blocks_.match_prefix(seq);
    int64_t n = remaining;
    if (remaining > budget) {
      if (config_.enable_chunked_prefill) {
        n = budget;
      } else if (!out.scheduled.empty()) {
        break;  // whole prompts only; a prompt larger than any batch waits to run alone
      }
    }
    if (!blocks_.can_allocate_prompt(seq, n)) {
      if (running_.empty()) throw_too_large(seq, seq.num_tokens() - remaining + n);
      break;  // FCFS: no one skips ahead of the head of the queue
    }
    waiting_.pop_front();
    seq.draft_tokens.clear();
    blocks_.allocate_prompt(seq);
    blocks_.reserve(seq, n);
    seq.status = SequenceStatus::kRunning;
    running_.push_back(&seq);
    out.scheduled.push_back(make_scheduled(seq, n));
    budget -= n;
  }
}

void Scheduler::finish(Sequence* seq, FinishReason reason) {
  if (seq == nullptr) throw std::invalid_argument("Scheduler::finish: null sequence");
  if (seq->is_finished()) return;  // the first reason stands
  blocks_.free(*seq);
  std::erase(running_, seq);
  std::erase(waiting_, seq);
  seq->draft_tokens.clear();
  seq->status = SequenceStatus::kFinished;
  seq->finish_reason = reason;
}

ScheduledSequence Scheduler::make_scheduled(Sequence& seq, int64_t num_new_tokens) {
  const bool samples = seq.num_computed_tokens + num_new_tokens >= seq.num_tokens();
  return {&seq, num_new_tokens, seq.is_prefill(), samples};
}

void Scheduler::throw_too_large(const Sequence& seq, int64_t num_tokens) const {
  throw SequenceTooLarge(seq.id, "sequence " + std::to_string(seq.id) + " needs " +
                           std::to_string(blocks_.num_blocks_for(num_tokens)) + " KV blocks for " +
                           std::to_string(num_tokens) + " tokens but the cache has only " +
                           std::to_string(blocks_.num_blocks()) + " blocks of " +
                           std::to_string(blocks_.block_size()) +
                           "; finish it (abort), shorten prompt + max_tokens, or give the cache more blocks");
}

}  // namespace mtpserve
