#pragma once
// Chooses how many MTP drafts each decoding sequence takes for the next step.
//   fixed:    every sequence drafts k_max (within its budget); so do pinned sequences under adaptive.
//   adaptive: the step's k in 0..k_max that minimises the requests' mean time per output token (below), from the
//             measured step costs (StepCostModel) and the acceptance estimates (AcceptanceStats); within that k, a
//             sequence whose own acceptance makes a draft worth less than the time it adds drafts fewer (trim).
// The mean TPOT weighs every request once, and a step's sequences are not a fair sample of the requests: a request
// stays for about n / e steps (n its output tokens, e its tokens per step), so the slow ones are in more steps.
// Weighting each sequence by e / n undoes that, and the requests' mean TPOT is then the step's seconds times
// sum(1 / n) / sum(e / n) over its sequences (Estimate::tpot). With equal n that is the batch's seconds per token;
// n weighs short requests more, which matters where acceptance goes with length: on a CPU at 64 concurrent
// ShareGPT requests, fixed k = 3 gave 5% more tokens/s than k = 1 and a 7% worse mean TPOT, its requests under 128
// tokens accepted 0.52-0.63 of the time at k = 3 against 0.75-0.82 for the longer ones. The mean of each sequence's
// seconds per token over the step's sequences, which this replaced, weighs a sequence by the steps it stays: a
// retired request (one token a step) beside a drafting one held the other to one draft at an H200's costs. There,
// at c = 2, adaptive ran k = 1 on 11% of its steps with 3 requests retired and fell 4% behind fixed k = 3's mean
// TPOT in every round (docs/benchmarks.md, twenty-ninth session).
// The rules below are why the adaptive policy is more than that choice; docs/benchmarks.md has the measurements
// behind them ("Adaptive speculation on CPU (issue 14)" and the sections after it).
//
// Keeping the estimates fresh. In each batch-size bucket of the cost model the policy first cycles k through
// 0..k_max (warm-up: the bucket's fits need steps of each k), then takes every kProbeInterval-th step at a
// cycled k other than the one it chose last, so that a cost or an acceptance it has stopped observing cannot
// go stale (StepCostModel forgets per step, not per sample, so a probe's fresh timing outweighs stale ones).
// While the probes find the choice clearly right (kProbeMargin), each doubles the interval, up to
// kMaxProbeInterval; a change of choice brings it back. At k = 0 with deferred fills, where nothing between probes
// measures the drafting, the probes instead keep a pace at which their bursts of k = 1..k_max take at most
// kProbeBudget of the time more than k = 0 steps would (by the cost model's estimate, kProbeInterval at the least).
//
// Where fills are deferred (EngineConfig::deferred_fill_positions; a CPU by default), a sequence given no
// drafts stashes its MTP fill instead of running it.
//   - Where the estimate gives it no drafts (in the plan it chooses, on a probe step too), what waits is
//     dropped, not caught up (DraftPlan::drop; it drafts again once the estimate gives it drafts): catching up
//     would be insurance paid on every full stash and every probe. The engine leaves those MTP cache rows
//     unwritten; drafts that later read the holes stay lossless but may be accepted less
//     (scripts/bench_dropped_fills.py). So a k = 0 step is priced as a step without MTP (priced as owing its
//     fills, k = 0 lost to k = 1 at batch 64 on a CPU, where k = 1 ran 10% slower), and resuming is not charged
//     for what it catches up (a one-time cost set against one step's rate would hold back drafts that pay).
//   - A sequence whose drafts fail takes none, probes included (a probe would only catch it up), and retires
//     once its stash is full (DraftPlan::retire: the engine drops its stash and it never drafts again, even if
//     the load falls). Its drafts fail where its own measured acceptance makes drafting not pay while drafts
//     that are always accepted would (in this batch, or alone in a step: elsewhere the costs are to blame, not
//     the sequence), and would emit clearly more tokens than its own (kBlameMargin). Drafts that are always
//     accepted never fail, and are not the test alone: on a CPU at batch 64 they sit at the break-even. Nor do
//     drafts that the estimate still favours, until the sequence's own record outweighs its prior twice over.
//
// Where every step fills (fill_every = 1; a GPU by default), nothing waits and nothing is dropped: the fill of a
// sequence given no drafts runs each step, and k = 0 costs more than a model without MTP (on the H100 at
// temperature 1.5 it held k = 0 at 0.8x of one). There sequences retire by the batch's measure
// (retire_by_batch): where the estimate prices the plan it favours below a step of k = 0 without any fill, each
// sequence counts a failed plan, and one with kRetireStreak in a row retires once its own acceptance is known
// (until then it drafts, to learn it: its fill runs anyway).
//   - A sequence whose drafts would beat a step without MTP, were every sequence's like its own, counts no
//     failure: a narrow win holds its streak, a clear one (kExemptMargin) restarts it. Without that, a batch of
//     always-accepted and always-rejected sequences retired all of them about half the time on a CPU; with a
//     restart on every narrow win, drafts accepted 1 time in 4 or 5 kept the fill running for the whole batch
//     on a GPU. The drafts are judged by their acceptance less one standard error
//     (AcceptanceStats::sequence_low), so that a few lucky drafts do not keep the fill running (they did for a
//     batch of 32 on the H100, for 10-30 steps).
//   - The batch, not each sequence's own break-even, is the measure: while any sequence drafts, the fill runs
//     for all (one graph), and retiring a sequence whose drafts pay at that marginal cost loses its drafts for
//     nothing (a greedy GPU sweep fell from 5 of 8 to 2 of 8 concurrencies within 0.95x of the best fixed k).
//     The streak asks for a sustained failure, not a few bad drafts.
//
// New sequences. A new sequence retires at once (at its first plan, before its prompt's fill) where its sampling
// class's record (AcceptanceStats::class_high: greedy, or its temperature), even one standard error high, fails
// the test of its mode above; otherwise it fills until its own record can retire it, and its class does not
// judge it again (on the H100 at temperature 1.5, its prompt's fill and the steps before retirement
// cost 3-5% of a 128-token request; on a CPU it never retired within 64 tokens). Such sequences lean on the
// class, which is measured anew every so many (AcceptanceStats::lean_on_class). The engine asks this of each
// arriving sequence first (retires_on_arrival): one that retires then never fills, and may be served
// prefix-cache blocks that lack MTP rows (at c = 64 on a CPU a temperature-1.5 request otherwise hit 58% of
// its repeated prompt where k = 0 hit 82%).
//
// A retired sequence stays in the step (NonDrafting): its row and context still count towards the step's costs.
#include <cstdint>
#include <optional>
#include <unordered_map>
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
  int64_t stashed = 0;  // positions whose fill waits (deferred): a full stash may retire the sequence
  // Sequences whose drafts tend to fare alike (SpeculationPolicy::sampling_class); -1: none.
  int64_t sampling_class = -1;
  // The output tokens its request may reach (max_tokens within the context), n in the mean TPOT's weights above.
  int64_t output_tokens = 1;
  // A request's weight in the mean TPOT, for candidates and non-drafting sequences alike.
  static double weight_of(int64_t output_tokens) { return 1.0 / static_cast<double>(output_tokens); }
  double weight() const { return weight_of(output_tokens); }
};

// The step's decoding sequences the policy does not plan for (retired): a row each.
struct NonDrafting {
  int64_t seqs = 0;
  int64_t context = 0;  // their context lengths, summed
  double inverse_outputs = 0;  // their weights (DraftCandidate::weight_of), summed
};

struct DraftPlan {
  int64_t step_k = 0;           // the most drafts any sequence takes
  std::vector<int64_t> drafts;  // per candidate
  std::vector<bool> retire;     // per candidate: drops its stash and drafts no more (see above)
  std::vector<bool> drop;       // per candidate: what waits in its stash is dropped, not caught up (see above)
  // per candidate given no drafts: its fill waits (is stashed). Not on a probe at k = 0 where the estimate
  // would draft for it: it fills as it goes, so the next step does not catch up (an eager forward on a GPU).
  // Nor where the estimate trimmed it to no drafts in a step that drafts (see SpeculationPolicy::best).
  std::vector<bool> defer;
};

class SpeculationPolicy {
 public:
  // Warm-up: this many plans at each k in turn.
  static constexpr int64_t kWarmupRounds = 4;
  // After warm-up, one plan in this many is a probe at a cycled k: a few percent of the steps
  // at most run at a k the estimate did not choose. Each probe after which the choice is clear
  // (every other k estimated kProbeMargin below it) doubles the interval, up to kMaxProbeInterval;
  // otherwise, or on a change of choice, it goes back to kProbeInterval (see above).
  static constexpr int64_t kProbeInterval = 50;
  static constexpr int64_t kMaxProbeInterval = 16 * kProbeInterval;
  // A k estimated within this of the choice may overtake it after a few more measurements: step times
  // on a shared CPU move by 5-10% from step to step, and the acceptance of a position the chosen k does
  // not draft rests on the probes' few samples.
  static constexpr double kProbeMargin = 0.1;
  // At k = 0 with deferred fills: the share of the time that the probe bursts may add (see above). At batch 64 on a
  // CPU a burst takes about four k = 0 steps more (a k = 1 / 2 / 3 step is 1.9 / 2.3 / 3.0 of one), so one burst per
  // kProbeInterval made a run that drafted only on its probes 3.4% slower than k = 0; paced, batch 64 gained about 3%
  // of k = 0's TPOT. A budget of 1% gained no more there, and would take twice as long to leave k = 0 where drafting
  // comes to pay.
  static constexpr double kProbeBudget = 0.02;
  // Where every step fills: the failed plans in a row after which a sequence retires (see above).
  static constexpr int64_t kRetireStreak = 6;
  // Where every step fills: how much better than a step without MTP a sequence's drafts must be, were every
  // sequence's like its own, to restart its streak of failed plans (see above).
  static constexpr double kExemptMargin = 0.25;
  // Where fills are deferred: how many more tokens per step (at k_max) always-accepted drafts must emit than a
  // sequence's own for its acceptance to be blamed (see above). At c >= 64 on a CPU, where the best fixed k gains
  // about 1.2x, a 10-20% drift of the step costs moved the gain of greedy drafts accepted 85-92% of the time below
  // 1 while always-accepted ones still paid: without this margin 27-78 such sequences per run retired for good,
  // and the steps ran k = 0 a quarter of the time. Drafts accepted 85% of the time emit 1/1.26 of the tokens of
  // always-accepted ones at k = 3; accepted 1 time in 8 (temperature 1.5), 1/3.5.
  static constexpr double kBlameMargin = 0.5;

  // fill_every: 1 where every step fills; else the most steps a fill is deferred by.
  SpeculationPolicy(SpeculationPolicyKind kind, int64_t k_max, int64_t fill_every = 1);

  // Greedy sequences form one class; sampled ones one per tenth of temperature (1.5: class 16).
  static int64_t sampling_class(bool greedy, double temperature);

  DraftPlan plan(const std::vector<DraftCandidate>& candidates, NonDrafting others = {});
  // Whether a new sequence retires on arrival, before its prompt runs: where its first plan, with `others` beside
  // it, would retire it by its sampling class's record (adaptive only; a forced schedule retires none). One that
  // retires never fills the MTP cache, so its prompt may be served blocks whose MTP rows were never written
  // (BlockManager::set_draft_layer). Classifies the sequence in any case: its verifications count towards its
  // class's record, and that record, once known, vouches for it (AcceptanceStats::vouched_for).
  bool retires_on_arrival(const DraftCandidate& c, NonDrafting others);
  // Tests only: the step's k of plan i is schedule[i % size] (within budgets, pinned or not), whatever
  // the kind; with `unpaid`, plan i drops the waiting positions of its unpinned sequences where
  // unpaid[i % size] (as if the load were past the break-even: the estimate gives them no drafts).
  void force_schedule(std::vector<int64_t> schedule, std::vector<bool> unpaid = {}) {
    schedule_ = std::move(schedule);
    unpaid_ = std::move(unpaid);
    forced_plans_ = 0;
  }

  StepCostModel& costs() { return costs_; }
  AcceptanceStats& acceptance() { return acceptance_; }

 private:
  struct Estimate {
    double tokens = 0, seconds = 0;
    double inverse_outputs = 0;  // the sum over the step's sequences of 1 / n (its request's output tokens)
    double weighted_tokens = 0;  // the sum of e / n (e its expected tokens)
    // The requests' mean TPOT at this plan (see the top of this file).
    double tpot() const { return seconds * inverse_outputs / weighted_tokens; }
  };
  // The plan the estimate favours, and whether it is clear (see kProbeMargin).
  struct Choice {
    DraftPlan plan;
    bool clear = false;
  };
  // What a step computes, summed over its sequences: what the step cost model prices.
  struct StepWork {
    int64_t seqs = 0, step_k = 0;
    double rows = 0, context = 0;
    double tokens = 0;     // expected tokens emitted
    double fill_rows = 0;  // the candidates' expected tokens: positions the next fill runs, now or deferred
    double recursion_rows = 0;
    double inverse_outputs = 0, weighted_tokens = 0;  // as Estimate's (where a plan is weighed)
  };
  // The step's sequences and their context lengths, summed: the load its costs are priced at.
  struct Load {
    int64_t seqs = 0;
    double context = 0;
  };
  static Load load_of(const std::vector<DraftCandidate>& candidates, const NonDrafting& others);
  DraftPlan forced(const std::vector<DraftCandidate>& candidates);
  // Each candidate's drafts at step k: k within its budget (k_max where pinned).
  std::vector<int64_t> uniform_drafts(const std::vector<DraftCandidate>& candidates, int64_t k) const;
  DraftPlan uniform(const std::vector<DraftCandidate>& candidates, int64_t k) const;
  DraftPlan warmup_plan(const std::vector<DraftCandidate>& candidates, int64_t k) const;
  // reach[s][i]: probability that candidate s's drafts 1..i are all accepted (reach[s][0] = 1).
  std::vector<std::vector<double>> reaches(const std::vector<DraftCandidate>& candidates) const;
  Choice best(const std::vector<DraftCandidate>& candidates, const std::vector<std::vector<double>>& reach,
              const NonDrafting& others) const;
  // Per candidate: its fills wait (deferred), the estimate gives it no drafts or its own record is proven
  // (AcceptanceStats::proven), and drafting does not pay in a batch of sequences that all had its measured
  // acceptance (AcceptanceStats::measured), though it would with drafts that are always accepted, in this batch
  // (`always_pays`) or for the sequence alone in a step.
  std::vector<bool> failing(const std::vector<DraftCandidate>& candidates, const Load& load, bool always_pays,
                            const DraftPlan& estimated) const;
  // Whether drafts with these reach probabilities do not pay at `load` because of their acceptance: always-accepted
  // drafts would pay, in this step (`always_pays`) or for the sequence alone in a step, and the drafts are poorly
  // accepted (poorly_accepted).
  bool acceptance_to_blame(const DraftCandidate& c, const Load& load, bool always_pays,
                           const std::vector<double>& reach) const;
  // Whether always-accepted drafts would emit more than 1 + kBlameMargin times the tokens of these, at k_max.
  bool poorly_accepted(const std::vector<double>& reach) const;
  // The reach probabilities of the record of a new sequence's sampling class, one standard error high, where the
  // sequence is seen for the first time (and is not pinned) and the class has one; none otherwise. Classifies
  // the sequence, so that its verifications count towards its class, unless the class has a record and `load` was
  // never timed: then the sequence counts as not yet seen.
  std::optional<std::vector<double>> class_reach(const DraftCandidate& c, const Load& load);
  // Whether a step of k = 0 at `load` has a cost estimate (its batch-size bucket has timings).
  bool timed(const Load& load) const;
  // Whether a new sequence retires at once by its class's record (class_reach) at `load`: its drafts would not
  // beat a step without any fill where every step fills, else its acceptance is to blame (acceptance_to_blame,
  // with `always_pays`). Leans on the class where it does (AcceptanceStats::lean_on_class).
  bool class_fails(const DraftCandidate& c, const Load& load, bool always_pays);
  // Whether some k >= 1 beats k = 0 for a step of `seqs` sequences (`context` tokens in all) that all draft
  // k with these reach probabilities.
  bool drafting_pays(int64_t seqs, double context, const std::vector<double>& reach) const;
  // The best such k's tokens per second over k = 0's (unbounded before any timing).
  // `unfilled`: against k = 0 without any MTP fill (what retiring them all would give), not k = 0 as it runs.
  double drafting_gain(int64_t seqs, double context, const std::vector<double>& reach, bool unfilled = false) const;
  // A step of `seqs` sequences (`context` tokens in all) that all draft k >= 1 with these reach probabilities.
  static StepWork drafting_work(int64_t seqs, double context, const std::vector<double>& reach, int64_t k);
  // The probe interval at k = 0 with deferred fills (see kProbeBudget), at `load`.
  int64_t paced_interval(const Load& load) const;
  // Where every step fills: counts the candidates' failed plans (the `estimated` plan priced below k = 0
  // without a fill) and retires those with kRetireStreak in a row (see above).
  void retire_by_batch(const std::vector<DraftCandidate>& candidates, const std::vector<std::vector<double>>& reach,
                       const NonDrafting& others, const DraftPlan& estimated, DraftPlan& plan);
  // Drops drafts whose expected tokens, weighted as in Estimate::tpot, cut the plan's mean TPOT by less than the
  // time they add raises it, at the margins of `plan` (see best()).
  void trim(const std::vector<DraftCandidate>& candidates, const std::vector<std::vector<double>>& reach,
            const Estimate& plan, int64_t num_seqs, std::vector<int64_t>& drafts) const;
  Estimate estimate(const std::vector<DraftCandidate>& candidates, const std::vector<std::vector<double>>& reach,
                    const NonDrafting& others, const std::vector<int64_t>& drafts) const;
  Estimate estimate(const StepWork& work) const;
  // A step of k = 0 at `load` without any fill (0 seconds where its batch-size bucket has no timings).
  Estimate unfilled_step(const Load& load) const;
  // Whether a sequence given `drafts` drafts has its positions filled: with fills deferred, one given none
  // never does (what waits for it is dropped), so a plan prices no fill for it.
  bool fills(int64_t drafts) const;

  SpeculationPolicyKind kind_;
  int64_t k_max_;
  int64_t fill_every_;
  std::vector<double> always_accepted_;  // the reach of drafts that are always accepted: 1 at every position
  StepCostModel costs_;
  AcceptanceStats acceptance_;
  std::vector<int64_t> schedule_;
  std::vector<bool> unpaid_;
  struct Bucket {
    int64_t plans = 0;     // adaptive plans made
    int64_t chosen_k = 0;  // the step's k of the last plan the estimate chose
    int64_t probe_interval = kProbeInterval;
    int64_t since_probe = 0;  // plans since the last probe (or since the warm-up)
    int64_t probes = 0;       // probe intervals completed: which k the next single probe takes
    bool judging = false;     // a probe just ended: the next estimate sets the interval
  };
  // The probe plan where the bucket's schedule is due one (see above); otherwise none, and the bucket's
  // chosen k and probe interval follow `choice`.
  std::optional<DraftPlan> probe(Bucket& bucket, const std::vector<DraftCandidate>& candidates, const Load& load,
                                 const Choice& choice) const;
  std::vector<Bucket> buckets_;  // per batch-size bucket
  struct Streak {
    int64_t failed = 0;  // plans in a row whose drafts failed
    int64_t plan = -1;   // the retire_by_batch call that counted it
  };
  // By sequence id, the last call's candidates only: a sequence that finished, or missed a step, starts anew.
  std::unordered_map<int64_t, Streak> failing_streak_;
  int64_t streak_plans_ = 0;  // retire_by_batch calls
  int64_t forced_plans_ = 0;
};

}  // namespace mtpserve
