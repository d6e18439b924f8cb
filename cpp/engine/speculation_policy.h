#pragma once
// Chooses how many MTP drafts each decoding sequence takes for the next step.
//   fixed:    every sequence drafts k_max (within its budget); so do pinned sequences under adaptive.
//   adaptive: the step's k in 0..k_max that maximises expected emitted tokens per second of the
//             batch, from the measured step costs (StepCostModel) and the acceptance estimates
//             (AcceptanceStats); within that k, a sequence whose own acceptance makes a draft
//             worth less than the time it adds drafts fewer.
// In each batch-size bucket of the cost model the adaptive policy first cycles k through
// 0..k_max (warm-up: the bucket's fits need steps of each k), and later takes every
// kProbeInterval-th step at a cycled k, so that a cost it has stopped observing cannot go stale.
// Where the engine defers the MTP fill of sequences given no drafts (EngineConfig::
// deferred_fill_positions), a k = 0 step starts no MTP forward: such a plan pays each row's fill (it
// runs later) and only a share of the fill's fixed cost, that of one catch-up every `fill_every`
// steps. A plan that drafts for a sequence pays its catch-up now (its waiting positions join the fill);
// one that keeps it at k = 0 does not (a sequence that finishes first never pays it). So resuming
// drafting must win back the catch-up, and the policy does not flip between k = 0 and drafting
// every few steps.
#include <cstdint>
#include <vector>

#include "engine/acceptance_stats.h"
#include "engine/step_cost_model.h"

namespace mtpserve {

enum class SpeculationPolicyKind { kAdaptive, kFixed };

struct DraftCandidate {
  int64_t seq_id;
  int64_t budget;   // most drafts it may take (max_tokens, context length, k_max)
  int64_t context;  // tokens in its context at its next step's first row
  // Drafts its whole budget whatever the load: a seeded sampled request's tokens depend on how many
  // drafts each of its steps verifies, and must not depend on what else runs.
  bool pinned = false;
  int64_t stashed = 0;  // positions whose fill waits (deferred): drafting catches them up first
};

struct DraftPlan {
  int64_t step_k = 0;           // the most drafts any sequence takes
  std::vector<int64_t> drafts;  // per candidate
};

class SpeculationPolicy {
 public:
  // Warm-up: this many plans at each k in turn.
  static constexpr int64_t kWarmupRounds = 4;
  // After warm-up, one plan in this many is a probe at a cycled k: a few percent of the steps
  // at most run at a k the estimate did not choose.
  static constexpr int64_t kProbeInterval = 50;

  // fill_every: 1 where every step fills; else the most steps a fill is deferred by.
  SpeculationPolicy(SpeculationPolicyKind kind, int64_t k_max, int64_t fill_every = 1);

  DraftPlan plan(const std::vector<DraftCandidate>& candidates);
  // Tests only: the step's k of plan i is schedule[i % size] (within budgets, pinned or not), whatever
  // the kind.
  void force_schedule(std::vector<int64_t> schedule) {
    schedule_ = std::move(schedule);
    forced_plans_ = 0;
  }

  StepCostModel& costs() { return costs_; }
  AcceptanceStats& acceptance() { return acceptance_; }

 private:
  struct Estimate {
    double tokens = 0, seconds = 0;
  };
  DraftPlan uniform(const std::vector<DraftCandidate>& candidates, int64_t k) const;
  DraftPlan best(const std::vector<DraftCandidate>& candidates) const;
  // Drops drafts whose expected tokens are worth less than the time they add at `seconds_per_token`.
  void trim(const std::vector<DraftCandidate>& candidates, const std::vector<std::vector<double>>& reach,
            double seconds_per_token, DraftPlan& plan) const;
  Estimate estimate(const std::vector<DraftCandidate>& candidates, const std::vector<std::vector<double>>& reach,
                    const DraftPlan& plan) const;

  SpeculationPolicyKind kind_;
  int64_t k_max_;
  int64_t fill_every_;
  StepCostModel costs_;
  AcceptanceStats acceptance_;
  std::vector<int64_t> schedule_;
  std::vector<int64_t> plans_;  // adaptive plans made, per batch-size bucket
  int64_t forced_plans_ = 0;
};

}  // namespace mtpserve
