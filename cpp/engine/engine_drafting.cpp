// Engine's drafting after each step: which scheduled sequences draft and how many tokens (the speculation policy's
// plan, made ahead or after sampling), whose MTP fills wait in the stash, are dropped or retire, and the draft
// forwards themselves. The rest of the step is in engine.cpp.
#include <algorithm>
#include <utility>

#include "engine/engine.h"
#include "engine/step_input.h"

namespace mtpserve {

bool Engine::any_drafts(const SchedulerOutput& plan) const {
  return drafter_ && std::any_of(plan.scheduled.begin(), plan.scheduled.end(), [](const ScheduledSequence& s) {
           return !s.seq->is_finished() && s.seq->drafts;
         });
}

double Engine::draft_next(const SchedulerOutput& plan, const StepInput& input, const std::vector<int64_t>& first_pairs,
                          double sampled_at, const std::optional<PlannedDrafts>& ahead, bool decoding, bool drafts) {
  const auto unfinished = [](const ScheduledSequence& s) { return !s.seq->is_finished(); };
  if (!config_.lockstep && !drafts) {
    // Every sequence finished or retired: nothing fills or drafts, and skipping the drafting's host work and its
    // timer's synchronisation keeps such steps as cheap as without MTP. (In lockstep the other data-parallel
    // groups' drafting still needs this rank.)
    std::lock_guard lock(stats_mutex_);
    stats_.fill_skipped_steps += std::any_of(plan.scheduled.begin(), plan.scheduled.end(), unfinished) ? 1 : 0;
    return 0.0;
  }
  draft_timer_->start();
  const DraftShape shape = draft(plan, input, first_pairs, ahead);
  draft_timer_->stop();
  const double seconds = timer_->seconds() - sampled_at;
  if (shape.fill_rows > 0 && decoding) {
    policy_->costs().record_draft(shape.num_seqs, shape.fill_rows, shape.recursions, shape.recursion_rows, seconds);
  }
  const double device_seconds = draft_timer_->seconds();
  std::lock_guard lock(stats_mutex_);
  stats_.draft_seconds += device_seconds;
  stats_.draft_host_seconds += shape.launched_at - sampled_at;
  stats_.plan_seconds += shape.plan_seconds;
  stats_.fill_skipped_steps += shape.num_seqs > 0 && shape.fill_rows == 0 ? 1 : 0;
  stats_.caught_up_positions += shape.caught_up;
  return seconds;
}

int64_t Engine::draft_budget(const Sequence& seq, int64_t gained) const {
  // No drafts past max_tokens or past the context (the next step feeds positions up to n - 1 + k).
  const int64_t outputs = seq.num_output_tokens() + gained;
  const int64_t k = std::min({config_.num_speculative_tokens, seq.params.max_tokens - outputs - 1,
                              config_.max_model_len - seq.num_tokens() - gained});
  return std::max<int64_t>(0, k);
}

std::optional<DraftCandidate> Engine::step_candidate(const Sequence& seq, bool samples, int64_t gained) const {
  if (!samples) return std::nullopt;
  DraftCandidate c = draft_candidate(seq, stash_ ? stash_->count(seq.id) : 0, gained);
  if (c.budget == 0) return std::nullopt;
  return c;
}

std::pair<DraftPlan, double> Engine::timed_plan(const std::vector<DraftCandidate>& candidates, NonDrafting retired) {
  const double started = timer_->seconds();
  DraftPlan plan = policy_->plan(candidates, retired);
  return {std::move(plan), timer_->seconds() - started};
}

std::optional<Engine::PlannedDrafts> Engine::plan_ahead(const SchedulerOutput& plan, const StepInput& input,
                                                        bool drafts) {
  // With nothing left to draft there is nothing to plan (draft_next returns at once). The empty plan's pass over the
  // sequences cost 2-3 us a step of 80 retired ones on a CPU, where the GPU's steps of the embedded model take
  // 0.5-0.8 ms.
  if (!config_.plan_ahead || !policy_ || !drafts) return std::nullopt;
  PlannedDrafts ahead;
  std::vector<DraftCandidate> candidates;
  NonDrafting retired;
  for (size_t i = 0; i < plan.scheduled.size(); ++i) {
    const Sequence& seq = *plan.scheduled[i].seq;
    const bool samples = input.num_samples[i] > 0;
    const int64_t gained = samples ? 1 : 0;
    if (seq.is_finished()) continue;
    if (!seq.drafts) {
      count_in(seq, gained, retired);
      continue;
    }
    if (auto c = step_candidate(seq, samples, gained)) {
      candidates.push_back(*c);
      ahead.seq_ids.push_back(seq.id);
    }
  }
  std::tie(ahead.plan, ahead.seconds) = timed_plan(candidates, retired);
  return ahead;
}

DraftPlan Engine::fit_plan(const PlannedDrafts& ahead, const std::vector<DraftCandidate>& candidates) {
  DraftPlan fitted;
  auto next = ahead.seq_ids.begin();
  for (const DraftCandidate& c : candidates) {
    const auto found = std::find(next, ahead.seq_ids.end(), c.seq_id);
    const bool planned = found != ahead.seq_ids.end();
    const auto j = static_cast<size_t>(found - ahead.seq_ids.begin());
    if (planned) next = found + 1;
    const int64_t drafts = planned ? std::min(ahead.plan.drafts[j], c.budget) : 0;
    fitted.drafts.push_back(drafts);
    fitted.retire.push_back(planned && ahead.plan.retire[j]);
    fitted.drop.push_back(planned && ahead.plan.drop[j]);
    fitted.defer.push_back(planned ? ahead.plan.defer[j] : true);
    fitted.step_k = std::max(fitted.step_k, drafts);
  }
  return fitted;
}

Engine::DraftShape Engine::draft(const SchedulerOutput& plan, const StepInput& input,
                                 const std::vector<int64_t>& first_pairs, const std::optional<PlannedDrafts>& ahead) {
  std::vector<DraftRequest> requests;
  std::vector<DraftCandidate> candidates;
  std::vector<size_t> candidate_request;
  std::vector<bool> decoded;  // per request: its step was a decode or verify, not a prefill chunk
  NonDrafting retired;
  for (size_t i = 0; i < plan.scheduled.size(); ++i) {
    Sequence& seq = *plan.scheduled[i].seq;
    if (seq.is_finished()) continue;
    if (!seq.drafts) {
      count_in(seq, 0, retired);
      continue;
    }
    requests.push_back({&seq, first_pairs[i], seq.num_computed_tokens - first_pairs[i], input.query_start[i], 0});
    decoded.push_back(!plan.scheduled[i].is_prefill);
    if (auto c = step_candidate(seq, input.num_samples[i] > 0)) {
      candidates.push_back(*c);
      candidate_request.push_back(requests.size() - 1);
    }
  }
  DraftShape shape;
  const auto [chosen, plan_seconds] =
      ahead ? std::pair{fit_plan(*ahead, candidates), ahead->seconds} : timed_plan(candidates, retired);
  shape.plan_seconds = plan_seconds;
  std::vector<bool> unused(requests.size(), false), retiring(requests.size(), false), dropping(requests.size(), false);
  std::vector<bool> deferring(requests.size(), true);
  for (size_t c = 0; c < candidates.size(); ++c) {
    DraftRequest& r = requests[candidate_request[c]];
    dropping[candidate_request[c]] = chosen.drop[c];
    deferring[candidate_request[c]] = chosen.defer[c];
    if (chosen.retire[c]) {
      retire(requests_.at(r.seq->id), r.first_pair);
      retiring[candidate_request[c]] = true;
      continue;
    }
    int64_t k = chosen.drafts[c];
    if (k > 0 && !blocks_.can_reserve(*r.seq, k)) k = 0;  // drafting is optional work
    if (k > 0) blocks_.reserve(*r.seq, k);
    // With no drafts the fill still yields draft 1 (at no extra cost): kept aside to measure acceptance.
    r.num_drafts = std::max<int64_t>(k, 1);
    unused[candidate_request[c]] = k == 0;
  }
  shape.num_seqs = static_cast<int64_t>(requests.size()) + retired.seqs;
  requests = defer_fills(std::move(requests), decoded, unused, retiring, dropping, deferring);
  DraftForwards forwards = drafter_->forwards(requests);
  shape.launched_at = timer_->seconds();
  drafter_->run(requests, std::move(forwards));
  for (size_t i = 0; i < requests.size(); ++i) {
    const DraftRequest& r = requests[i];
    Request& request = requests_.at(r.seq->id);
    shape.fill_rows += r.stashed.count + r.num_pairs;
    shape.caught_up += r.stashed.count;
    shape.recursions = std::max<int64_t>(shape.recursions, r.num_drafts - 1);
    shape.recursion_rows += std::max<int64_t>(r.num_drafts - 1, 0);
    if (!request.forced_drafts.empty() && r.num_drafts > 0) {
      const auto n = static_cast<size_t>(r.seq->num_output_tokens());
      const size_t end = std::min(request.forced_drafts.size(), n + r.num_drafts);
      r.seq->draft_tokens.assign(request.forced_drafts.begin() + std::min(n, end),
                                 request.forced_drafts.begin() + end);
    }
    if (unused[i] && !r.seq->draft_tokens.empty()) {
      request.unused_draft = r.seq->draft_tokens[0];
      r.seq->draft_tokens.clear();
    }
  }
  revise_constrained_drafts(requests);
  return shape;
}

std::vector<DraftRequest> Engine::defer_fills(std::vector<DraftRequest> requests, const std::vector<bool>& decoded,
                                              std::vector<bool>& unused, const std::vector<bool>& retiring,
                                              const std::vector<bool>& dropping, const std::vector<bool>& deferring) {
  std::vector<DraftRequest> filling;
  std::vector<bool> filling_unused;
  std::vector<int64_t> target_rows, stash_rows;
  for (size_t i = 0; i < requests.size(); ++i) {
    DraftRequest& r = requests[i];
    if (retiring[i]) continue;
    Request& request = requests_.at(r.seq->id);
    const bool drafts = r.num_drafts > 0 && !unused[i];
    // Until its acceptance is known, a sequence keeps filling: the fill's draft 1 measures it. Its class's record,
    // once known, stands in for it: at batch 64 on a CPU, where no drafts paid, each batch of new sequences otherwise
    // filled on 5 of its 127 steps, 2% of its time.
    if (!drafts && stash_ && deferring[i] && decoded[i] && policy_->acceptance().vouched_for(r.seq->id)) {
      auto row = stash_->push(r.seq->id, r.first_pair, r.num_pairs);
      if (!row && dropping[i]) {
        drop_stash(request);
        row = stash_->push(r.seq->id, r.first_pair, r.num_pairs);
      }
      if (row) {
        for (int64_t j = 0; j < r.num_pairs; ++j) {
          target_rows.push_back(r.hidden_row + j);
          stash_rows.push_back(*row + j);
        }
        r.seq->draft_tokens.clear();
        continue;
      }
    }
    // Drafting, or its stash is full: the fill catches up, unless what waits is dropped (without a stash
    // every step fills: nothing waits).
    if (stash_ && dropping[i]) {
      drop_stash(request);
    } else if (stash_) {
      r.stashed = stash_->take(r.seq->id);
    }
    filling.push_back(r);
    filling_unused.push_back(unused[i]);
  }
  runner_.stash_hidden(target_rows, stash_rows);
  unused = std::move(filling_unused);
  return filling;
}

int64_t Engine::mtp_filled_until(const Sequence& seq) const {
  if (const auto& unfilled_from = requests_.at(seq.id).unfilled_from) return *unfilled_from;
  return stash_ ? stash_->filled_until(seq.id, seq.num_computed_tokens) : seq.num_computed_tokens;
}

void Engine::drop_stash(Request& request) {
  const StashedPositions dropped = stash_->take(request.seq->id);
  if (dropped.count == 0) return;
  if (!request.unfilled_from) request.unfilled_from = dropped.first_pair;
  std::lock_guard lock(stats_mutex_);
  stats_.dropped_positions += dropped.count;
}

NonDrafting Engine::live_load() const {
  NonDrafting live;
  for (const auto& [id, request] : requests_) count_in(*request.seq, 0, live);
  return live;
}

void Engine::retire_on_arrival(Request& request, NonDrafting live) {
  Sequence& seq = *request.seq;
  if (draft_budget(seq) == 0) return;
  const DraftCandidate candidate = draft_candidate(seq, 0);
  live.seqs -= 1;
  live.context -= seq.num_tokens();
  live.inverse_outputs -= candidate.weight();
  if (!policy_->retires_on_arrival(candidate, live)) return;
  retire(request, 0);
}

DraftCandidate Engine::draft_candidate(const Sequence& seq, int64_t stashed, int64_t gained) const {
  const bool pinned = seq.params.seed.has_value() && !seq.params.greedy();
  return {seq.id, draft_budget(seq, gained), seq.num_tokens() + gained, pinned, stashed,
          SpeculationPolicy::sampling_class(seq.params.greedy(), seq.params.temperature), output_tokens(seq)};
}

int64_t Engine::output_tokens(const Sequence& seq) const {
  return std::max<int64_t>(1, std::min(seq.params.max_tokens, config_.max_model_len - seq.num_prompt_tokens));
}

void Engine::count_in(const Sequence& seq, int64_t gained, NonDrafting& load) const {
  load.seqs += 1;
  load.context += seq.num_tokens() + gained;
  load.inverse_outputs += DraftCandidate::weight_of(output_tokens(seq));
}

void Engine::retire(Request& request, int64_t first_pair) {
  Sequence& seq = *request.seq;
  if (!request.unfilled_from) request.unfilled_from = stash_ ? stash_->filled_until(seq.id, first_pair) : first_pair;
  seq.drafts = false;
  if (stash_) stash_->take(seq.id);
  seq.draft_tokens.clear();
  policy_->acceptance().forget(seq.id);
  request.spec.retired += 1;
  std::lock_guard lock(stats_mutex_);
  stats_.spec.retired += 1;
}

void Engine::revise_constrained_drafts(const std::vector<DraftRequest>& requests) {
  std::vector<DraftRevision> revisions;
  for (const DraftRequest& r : requests) {
    Sequence& seq = *r.seq;
    if (!seq.params.constraint || seq.draft_tokens.empty()) continue;
    const std::span<const int64_t> tokens(seq.tokens);
    revisions.push_back({seq.params.constraint.get(), tokens.subspan(seq.num_prompt_tokens), &seq.draft_tokens});
  }
  if (!revisions.empty()) config_.token_masker->revise_drafts(revisions);
}

}  // namespace mtpserve
