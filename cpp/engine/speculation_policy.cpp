#include "engine/speculation_policy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <stdexcept>

namespace mtpserve {

namespace {

// r[i]: probability that drafts 1..i are all accepted, from the per-position acceptance p (r[0] = 1).
std::vector<double> reach_of(const std::vector<double>& p) {
  std::vector<double> r;
  r.reserve(p.size() + 1);
  r.push_back(1.0);
  for (double pj : p) r.push_back(r.back() * pj);
  return r;
}

// Expected tokens a step emits for a sequence given k drafts: the bonus token and each draft reached.
double expected_tokens(const std::vector<double>& reach, int64_t k) {
  return std::accumulate(reach.begin(), reach.begin() + k + 1, 0.0);
}

// The step's k: the most drafts any sequence takes (0 for none).
int64_t max_drafts(const std::vector<int64_t>& drafts) {
  return drafts.empty() ? 0 : *std::max_element(drafts.begin(), drafts.end());
}

}  // namespace

SpeculationPolicy::SpeculationPolicy(SpeculationPolicyKind kind, int64_t k_max, int64_t fill_every)
    : kind_(kind), k_max_(k_max), fill_every_(fill_every), always_accepted_(k_max + 1, 1.0), acceptance_(k_max) {
  if (k_max < 1) throw std::invalid_argument("SpeculationPolicy needs k_max >= 1");
  if (fill_every < 1) throw std::invalid_argument("SpeculationPolicy needs fill_every >= 1");
}

int64_t SpeculationPolicy::sampling_class(bool greedy, double temperature) {
  return greedy ? 0 : 1 + std::lround(10 * temperature);
}

DraftPlan SpeculationPolicy::plan(const std::vector<DraftCandidate>& candidates, NonDrafting others) {
  if (candidates.empty()) return {};
  if (!schedule_.empty()) return forced(candidates);
  if (kind_ == SpeculationPolicyKind::kFixed) return uniform(candidates, k_max_);
  acceptance_.age();
  const int64_t num_seqs = static_cast<int64_t>(candidates.size()) + others.seqs;
  const auto b = static_cast<size_t>(StepCostModel::bucket(num_seqs));
  if (buckets_.size() <= b) buckets_.resize(b + 1);
  Bucket& bucket = buckets_[b];
  const int64_t i = bucket.plans++;
  const int64_t warmup = kWarmupRounds * (k_max_ + 1);
  if (i < warmup) return warmup_plan(candidates, i % (k_max_ + 1));
  const auto reach = reaches(candidates);
  const Choice choice = best(candidates, reach, others);
  const DraftPlan& estimated = choice.plan;
  const Load load = load_of(candidates, others);
  DraftPlan chosen = probe(bucket, candidates, load, choice).value_or(estimated);
  if (fill_every_ == 1) {  // nothing is deferred: nothing waits or drops
    retire_by_batch(candidates, reach, others, estimated, chosen);
    return chosen;
  }
  // Sequences whose drafts fail take none, probes included (a probe would only catch them up), and
  // retire once their stash is full. What waits for a sequence the estimate gives no drafts is dropped,
  // not caught up.
  const bool always_pays = drafting_pays(load.seqs, load.context, always_accepted_);
  const std::vector<bool> fail = failing(candidates, load, always_pays, estimated);
  for (size_t s = 0; s < candidates.size(); ++s) {
    const DraftCandidate& c = candidates[s];
    if (class_fails(c, load, always_pays)) {
      chosen.drafts[s] = 0;
      chosen.retire[s] = true;
      continue;
    }
    chosen.drop[s] = c.stashed > 0 && !c.pinned && estimated.drafts[s] == 0;
    if (!fail[s]) continue;
    chosen.drafts[s] = 0;
    chosen.defer[s] = true;
    chosen.retire[s] = c.stashed >= fill_every_;
  }
  chosen.step_k = max_drafts(chosen.drafts);
  return chosen;
}

void SpeculationPolicy::retire_by_batch(const std::vector<DraftCandidate>& candidates,
                                        const std::vector<std::vector<double>>& reach, const NonDrafting& others,
                                        const DraftPlan& estimated, DraftPlan& plan) {
  const Load load = load_of(candidates, others);
  const Estimate unfilled = unfilled_step(load);
  const Estimate drafting = estimate(candidates, reach, others, estimated.drafts);
  const bool fails = unfilled.seconds > 0 && unfilled.tokens * drafting.seconds > drafting.tokens * unfilled.seconds;
  ++streak_plans_;
  for (size_t s = 0; s < candidates.size(); ++s) {
    const DraftCandidate& c = candidates[s];
    if (class_fails(c, load, /*always_pays=*/false)) {
      plan.drafts[s] = 0;
      plan.retire[s] = true;
      continue;
    }
    // A sequence whose drafts would beat a step without MTP, were every sequence's like its own, does not count: the
    // batch fails for the others' drafts, and retiring it would cost it its drafts for the rest of its life, after
    // they have gone. (Against k = 0 as it runs, fill included, a GPU's nearly free verify rows let drafts accepted
    // 1 time in 7 pass: at temperature 1.5 few sequences retired, and adaptive ran at 0.8x of k = 0.) Only drafts
    // that would beat it clearly (by kExemptMargin) restart its streak; narrower ones hold it. (On the H100 drafts
    // accepted 1 time in 4 or 5 passed narrowly now and then, and when each pass restarted the streak the fill
    // ran for the whole batch until the last of them retired: 0.90x of k = 0 at batch 8 and 32.) Its drafts count
    // for what its acceptance less one standard error says: a few lucky drafts do not restart its streak.
    Streak& counted = failing_streak_[c.seq_id];
    const int64_t before = counted.plan == streak_plans_ - 1 ? counted.failed : 0;
    int64_t streak = 0;
    if (fails && !c.pinned) {
      const double gain = drafting_gain(load.seqs, load.context, reach_of(acceptance_.sequence_low(c.seq_id)),
                                        /*unfilled=*/true);
      streak = gain > 1 + kExemptMargin ? 0 : gain > 1 ? before : before + 1;
    }
    counted = {streak, streak_plans_};
    if (streak < kRetireStreak) continue;
    if (!acceptance_.knows(c.seq_id)) {
      // Its fill runs every step anyway, and a plan that gives it no drafts would never let it learn what
      // retiring it needs: it stayed unretired, the fill running for the whole batch, until the next probe.
      plan.drafts[s] = std::max<int64_t>(plan.drafts[s], std::min<int64_t>(1, c.budget));
      continue;
    }
    plan.drafts[s] = 0;
    plan.retire[s] = true;
  }
  std::erase_if(failing_streak_, [&](const auto& entry) { return entry.second.plan != streak_plans_; });
  plan.step_k = max_drafts(plan.drafts);
}

std::optional<DraftPlan> SpeculationPolicy::probe(Bucket& bucket, const std::vector<DraftCandidate>& candidates,
                                                  const Load& load, const Choice& choice) const {
  // Probes run the k's other than the last chosen one (that one is measured anyway): one per interval,
  // in turn; all of them in a row where the drafting cost goes unmeasured between probes (k = 0
  // with deferred fills), so that the first, which catches up, is followed by plain drafting steps.
  const int64_t burst = bucket.chosen_k == 0 && fill_every_ > 1 ? k_max_ : 1;
  const int64_t phase = bucket.since_probe++ - (bucket.probe_interval - burst);
  const DraftPlan& estimated = choice.plan;
  if (phase < 0) {
    // At k = 0 with deferred fills the steps between probes measure nothing of the drafting (neither its cost nor
    // its acceptance): there the probes keep a pace set by their cost, whatever the estimate says.
    const bool unmeasured_between = estimated.step_k == 0 && fill_every_ > 1;
    if (bucket.judging) {  // the first estimate with the probes' measurements in it
      bucket.probe_interval = unmeasured_between ? paced_interval(load)
                              : choice.clear     ? std::min(2 * bucket.probe_interval, kMaxProbeInterval)
                                                 : kProbeInterval;
      bucket.judging = false;
    }
    if (estimated.step_k != bucket.chosen_k) {
      bucket.probe_interval = unmeasured_between ? paced_interval(load) : kProbeInterval;
    }
    bucket.chosen_k = estimated.step_k;
    return std::nullopt;
  }
  const int64_t k = burst > 1 ? phase % burst : bucket.probes % k_max_;
  DraftPlan plan = uniform(candidates, k < bucket.chosen_k ? k : k + 1);
  for (size_t s = 0; s < candidates.size(); ++s) plan.defer[s] = plan.drafts[s] == 0 && estimated.drafts[s] == 0;
  if (phase >= burst - 1) {
    bucket.since_probe = 0;
    ++bucket.probes;
    bucket.judging = true;
  }
  return plan;
}

DraftPlan SpeculationPolicy::warmup_plan(const std::vector<DraftCandidate>& candidates, int64_t k) const {
  DraftPlan plan = uniform(candidates, k);
  // Nothing says yet that drafting pays at this load: what waits is dropped, not caught up (as on a probe).
  // A batch that shrinks into a new bucket (its first requests finishing) would otherwise catch up every
  // stash in the warm-up's first drafting step.
  if (fill_every_ > 1) {
    for (size_t s = 0; s < candidates.size(); ++s) plan.drop[s] = candidates[s].stashed > 0 && !candidates[s].pinned;
  }
  return plan;
}

DraftPlan SpeculationPolicy::forced(const std::vector<DraftCandidate>& candidates) {
  DraftPlan plan = uniform(candidates, 0);
  const auto i = static_cast<size_t>(forced_plans_++);
  const bool unpaid = !unpaid_.empty() && unpaid_[i % unpaid_.size()];
  for (size_t s = 0; s < candidates.size(); ++s) {
    plan.drafts[s] = std::clamp<int64_t>(schedule_[i % schedule_.size()], 0, candidates[s].budget);
    plan.drop[s] = unpaid && !candidates[s].pinned;
    plan.defer[s] = plan.drafts[s] == 0;
  }
  plan.step_k = max_drafts(plan.drafts);
  return plan;
}

SpeculationPolicy::Load SpeculationPolicy::load_of(const std::vector<DraftCandidate>& candidates,
                                                   const NonDrafting& others) {
  Load load{static_cast<int64_t>(candidates.size()) + others.seqs, static_cast<double>(others.context)};
  for (const auto& c : candidates) load.context += static_cast<double>(c.context);
  return load;
}

std::vector<std::vector<double>> SpeculationPolicy::reaches(const std::vector<DraftCandidate>& candidates) const {
  std::vector<std::vector<double>> reach;
  reach.reserve(candidates.size());
  for (const auto& c : candidates) reach.push_back(reach_of(acceptance_.sequence(c.seq_id)));
  return reach;
}

std::vector<int64_t> SpeculationPolicy::uniform_drafts(const std::vector<DraftCandidate>& candidates, int64_t k) const {
  std::vector<int64_t> drafts;
  drafts.reserve(candidates.size());
  for (const auto& c : candidates) drafts.push_back(std::clamp<int64_t>(c.pinned ? k_max_ : k, 0, c.budget));
  return drafts;
}

DraftPlan SpeculationPolicy::uniform(const std::vector<DraftCandidate>& candidates, int64_t k) const {
  DraftPlan plan;
  plan.drafts = uniform_drafts(candidates, k);
  plan.step_k = max_drafts(plan.drafts);
  plan.retire.assign(candidates.size(), false);
  plan.drop.assign(candidates.size(), false);
  plan.defer.reserve(candidates.size());
  for (int64_t d : plan.drafts) plan.defer.push_back(d == 0);
  return plan;
}

SpeculationPolicy::Choice SpeculationPolicy::best(const std::vector<DraftCandidate>& candidates,
                                                  const std::vector<std::vector<double>>& reach,
                                                  const NonDrafting& others) const {
  // The plans are weighed by their drafts alone, and a DraftPlan is built for the chosen one only: the GPU
  // waits while the host plans, and at batch 64 an H200's host took 20 us per plan with a DraftPlan per plan
  // weighed (with the other allocations since removed), 9 us now, in a step of about 1.3 ms.
  const int64_t num_seqs = static_cast<int64_t>(candidates.size()) + others.seqs;
  std::vector<int64_t> drafts = uniform_drafts(candidates, 0), trimmed, chosen = drafts;
  const Estimate base = estimate(candidates, reach, others, drafts);
  if (base.seconds <= 0) return {uniform(candidates, k_max_), false};  // no timings yet: nothing to weigh
  double best_tpot = base.tpot();
  int64_t chosen_k = 0;  // the uniform k the chosen drafts were trimmed from
  // By the step k of the drafts kept for each k (trimmed or not).
  std::vector<double> tpot_at(k_max_ + 1, std::numeric_limits<double>::infinity());
  tpot_at[0] = best_tpot;
  for (int64_t k = 1; k <= k_max_; ++k) {
    drafts = uniform_drafts(candidates, k);
    const Estimate full = estimate(candidates, reach, others, drafts);
    trimmed = drafts;
    trim(candidates, reach, full, num_seqs, trimmed);
    const Estimate e = estimate(candidates, reach, others, trimmed);
    // Trimming judges each draft at the plan's margins; where that misjudges it, the uniform plan stands.
    double tpot = full.tpot();
    if (e.tpot() < tpot) {
      tpot = e.tpot();
      std::swap(drafts, trimmed);
    }
    const int64_t step_k = max_drafts(drafts);
    tpot_at[step_k] = std::min(tpot_at[step_k], tpot);
    if (tpot < best_tpot) {
      best_tpot = tpot;
      chosen_k = k;
      std::swap(chosen, drafts);
    }
  }
  // The plan keeps the uniform plan's `defer`: where fills are deferred, a sequence trimmed to no drafts in a step
  // that drafts still fills (unpriced by the estimate). It so measures its acceptance each step (the fill's draft 1)
  // and keeps its MTP cache whole. Deferring it instead (ad72e83, reverted) raised the share of k = 0 steps on a
  // CPU from 1-4% to 14-47% at c = 32-64, where adaptive fell below k = 0 (docs/benchmarks.md, 2026-11-28).
  Choice choice{uniform(candidates, chosen_k), false};
  choice.plan.drafts = std::move(chosen);
  choice.plan.step_k = max_drafts(choice.plan.drafts);
  tpot_at[choice.plan.step_k] = std::numeric_limits<double>::infinity();
  choice.clear = (1.0 - kProbeMargin) * *std::min_element(tpot_at.begin(), tpot_at.end()) > best_tpot;
  return choice;
}

void SpeculationPolicy::trim(const std::vector<DraftCandidate>& candidates,
                             const std::vector<std::vector<double>>& reach, const Estimate& plan,
                             int64_t num_seqs, std::vector<int64_t>& drafts) const {
  std::vector<double> cost(k_max_ + 1);  // by draft position
  for (int64_t k = 1; k <= k_max_; ++k) cost[k] = costs_.seconds_per_draft(num_seqs, k);
  for (size_t s = 0; s < candidates.size(); ++s) {
    int64_t& k = drafts[s];
    // Draft k's reach adds w * reach to the plan's weighted tokens E (w = 1 / the request's output tokens) and its
    // cost to the seconds T: tpot() = T * W / E falls with it where w * reach * T / E > cost. With equal output
    // tokens that is the tokens/s rule: reach * T / (the step's tokens) > cost.
    const double weight = candidates[s].weight();
    while (!candidates[s].pinned && k > 0 && weight * reach[s][k] * plan.seconds < cost[k] * plan.weighted_tokens) --k;
  }
}

std::vector<bool> SpeculationPolicy::failing(const std::vector<DraftCandidate>& candidates, const Load& load,
                                             bool always_pays, const DraftPlan& estimated) const {
  std::vector<bool> fail(candidates.size(), false);
  for (size_t s = 0; s < candidates.size(); ++s) {
    const DraftCandidate& c = candidates[s];
    if (c.pinned || c.stashed == 0) continue;
    // Where the estimate still gives it drafts, a short record of rejections does not retire it for good: on a
    // CPU at batch 1 a sequence that had 1 draft in 6 accepted retired while the estimate gave it 3. (Retired in a
    // batch that drafts, a sequence pays each step's time for one token.) A record of about 16 verifications does.
    if (estimated.drafts[s] > 0 && !acceptance_.proven(c.seq_id)) continue;
    // Its own record, not leaning on the others': drafts that have always been accepted (or not been
    // tried) never fail.
    fail[s] = acceptance_to_blame(c, load, always_pays, reach_of(acceptance_.measured(c.seq_id)));
  }
  return fail;
}

bool SpeculationPolicy::acceptance_to_blame(const DraftCandidate& c, const Load& load, bool always_pays,
                                            const std::vector<double>& reach) const {
  if (!poorly_accepted(reach) || drafting_pays(load.seqs, load.context, reach)) return false;
  // Its acceptance is to blame where always-accepted drafts would pay: in this step, or alone in one
  // (where drafting pays most). Elsewhere the load is, and it keeps its stash for when the load falls.
  const auto own = static_cast<double>(c.context);
  return always_pays || (drafting_pays(1, own, always_accepted_) && !drafting_pays(1, own, reach));
}

bool SpeculationPolicy::retires_on_arrival(const DraftCandidate& c, NonDrafting others) {
  if (kind_ != SpeculationPolicyKind::kAdaptive) return false;
  if (!schedule_.empty()) {
    if (c.sampling_class >= 0) acceptance_.classify(c.seq_id, c.sampling_class);
    return false;
  }
  const Load load = load_of({c}, others);
  return class_fails(c, load, fill_every_ > 1 && drafting_pays(load.seqs, load.context, always_accepted_));
}

bool SpeculationPolicy::class_fails(const DraftCandidate& c, const Load& load, bool always_pays) {
  const auto by_class = class_reach(c, load);
  if (!by_class) return false;
  // Where every step fills, against a step without any fill (what retiring them all would give).
  const bool fails = fill_every_ == 1 ? drafting_gain(load.seqs, load.context, *by_class, /*unfilled=*/true) <= 1
                                      : acceptance_to_blame(c, load, always_pays, *by_class);
  if (fails) acceptance_.lean_on_class(c.sampling_class);
  return fails;
}

std::optional<std::vector<double>> SpeculationPolicy::class_reach(const DraftCandidate& c, const Load& load) {
  // Only on its first sight: the class's verdict rests on one plan's cost estimate and retires for good. Judged
  // again while their own records were young, sequences whose drafts were all accepted retired after 2-5 steps
  // where a class had just become known and the step costs were noisy (a loaded CPU); their own records' test asks
  // for a streak of failed plans.
  if (c.sampling_class < 0) return std::nullopt;
  // A load no step was timed at gives no verdict (no evidence that drafting does not pay), so a known class's
  // sequence is first seen where one was: requests admitted alone to an engine whose batches ran larger otherwise
  // filled until their own records retired them (on a CPU, 6-7 steps with fills per batch of 80, none when the
  // batch was added at once).
  const auto high = acceptance_.class_high(c.sampling_class);
  if (!c.pinned && high && !timed(load)) return std::nullopt;
  if (!acceptance_.classify(c.seq_id, c.sampling_class) || c.pinned || !high) return std::nullopt;
  return reach_of(*high);
}

bool SpeculationPolicy::poorly_accepted(const std::vector<double>& reach) const {
  const double tokens = expected_tokens(reach, k_max_);
  return static_cast<double>(k_max_ + 1) > (1 + kBlameMargin) * tokens;
}

bool SpeculationPolicy::timed(const Load& load) const {
  return unfilled_step(load).seconds > 0;
}

bool SpeculationPolicy::drafting_pays(int64_t seqs, double context, const std::vector<double>& reach) const {
  return drafting_gain(seqs, context, reach) > 1;
}

double SpeculationPolicy::drafting_gain(int64_t seqs, double context, const std::vector<double>& reach,
                                        bool unfilled) const {
  constexpr double kUnbounded = std::numeric_limits<double>::infinity();
  const auto n = static_cast<double>(seqs);
  const Estimate base = estimate({seqs, 0, n, context, n, fills(0) && !unfilled ? n : 0.0, 0});
  if (base.seconds <= 0) return kUnbounded;  // no timings yet: no evidence that it does not pay
  double gain = 0;
  for (int64_t k = 1; k <= k_max_; ++k) {
    const Estimate e = estimate(drafting_work(seqs, context, reach, k));
    // A step that verifies drafts does at least the work of one that does not. Where the fits' noise (a k's
    // offset) says otherwise, that must not pass for a gain: drafts that are never accepted would seem to pay.
    gain = std::max(gain, e.tokens / (base.tokens * std::max(e.seconds, base.seconds)) * base.seconds);
  }
  return gain;
}

SpeculationPolicy::StepWork SpeculationPolicy::drafting_work(int64_t seqs, double context,
                                                             const std::vector<double>& reach, int64_t k) {
  const auto n = static_cast<double>(seqs);
  const double tokens = n * expected_tokens(reach, k);
  return {seqs, k, n * static_cast<double>(1 + k), context + n * static_cast<double>(k), tokens, tokens,
          n * static_cast<double>(k - 1)};
}

int64_t SpeculationPolicy::paced_interval(const Load& load) const {
  const double k0 = unfilled_step(load).seconds;  // its fill deferred
  if (k0 <= 0) return kProbeInterval;
  const auto reach = reach_of(acceptance_.engine());
  double extra = 0;  // the burst's time over as many k = 0 steps, in k = 0 steps
  for (int64_t k = 1; k <= k_max_; ++k) {
    extra += std::max(0.0, estimate(drafting_work(load.seqs, load.context, reach, k)).seconds / k0 - 1);
  }
  return std::clamp<int64_t>(std::llround(extra / kProbeBudget), kProbeInterval, kMaxProbeInterval);
}

SpeculationPolicy::Estimate SpeculationPolicy::unfilled_step(const Load& load) const {
  const auto n = static_cast<double>(load.seqs);
  return estimate({load.seqs, 0, n, load.context, n, 0.0, 0});
}

SpeculationPolicy::Estimate SpeculationPolicy::estimate(const std::vector<DraftCandidate>& candidates,
                                                        const std::vector<std::vector<double>>& reach,
                                                        const NonDrafting& others,
                                                        const std::vector<int64_t>& drafts) const {
  // The sequences the policy does not plan for add a row, a token and their context each.
  const auto others_seqs = static_cast<double>(others.seqs);
  StepWork work{static_cast<int64_t>(candidates.size()) + others.seqs, max_drafts(drafts), others_seqs,
                static_cast<double>(others.context), others_seqs};
  work.inverse_outputs = work.weighted_tokens = others.inverse_outputs;  // a token each
  for (size_t s = 0; s < candidates.size(); ++s) {
    const int64_t k = drafts[s];
    work.rows += static_cast<double>(1 + k);
    work.context += static_cast<double>(candidates[s].context + k);
    const double tokens = expected_tokens(reach[s], k);
    const double weight = candidates[s].weight();
    work.tokens += tokens;
    work.inverse_outputs += weight;
    work.weighted_tokens += weight * tokens;
    if (fills(k)) work.fill_rows += tokens;
    work.recursion_rows += static_cast<double>(std::max<int64_t>(k - 1, 0));
  }
  return estimate(work);
}

SpeculationPolicy::Estimate SpeculationPolicy::estimate(const StepWork& work) const {
  const double recursions = static_cast<double>(std::max<int64_t>(work.step_k - 1, 0));
  const double seconds = costs_.verify_seconds(work.seqs, work.step_k, work.rows, work.context) +
                         costs_.draft_seconds(work.seqs, work.fill_rows, recursions, work.recursion_rows);
  return {work.tokens, seconds, work.inverse_outputs, work.weighted_tokens};
}

bool SpeculationPolicy::fills(int64_t drafts) const { return drafts > 0 || fill_every_ == 1; }

}  // namespace mtpserve
