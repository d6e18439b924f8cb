#include "engine/speculation_policy.h"

#include <algorithm>
#include <stdexcept>

namespace mtpserve {

SpeculationPolicy::SpeculationPolicy(SpeculationPolicyKind kind, int64_t k_max, int64_t fill_every)
    : kind_(kind), k_max_(k_max), fill_every_(fill_every), acceptance_(k_max) {
  if (k_max < 1) throw std::invalid_argument("SpeculationPolicy needs k_max >= 1");
  if (fill_every < 1) throw std::invalid_argument("SpeculationPolicy needs fill_every >= 1");
}

DraftPlan SpeculationPolicy::plan(const std::vector<DraftCandidate>& candidates) {
  if (candidates.empty()) return {};
  if (!schedule_.empty()) {
    DraftPlan plan;
    for (const auto& c : candidates) {
      plan.drafts.push_back(std::clamp<int64_t>(schedule_[forced_plans_], 0, c.budget));
    }
    plan.step_k = *std::max_element(plan.drafts.begin(), plan.drafts.end());
    forced_plans_ = (forced_plans_ + 1) % static_cast<int64_t>(schedule_.size());
    return plan;
  }
  if (kind_ == SpeculationPolicyKind::kFixed) return uniform(candidates, k_max_);
  const auto bucket = static_cast<size_t>(StepCostModel::bucket(static_cast<int64_t>(candidates.size())));
  if (plans_.size() <= bucket) plans_.resize(bucket + 1, 0);
  const int64_t i = plans_[bucket]++;
  const int64_t warmup = kWarmupRounds * (k_max_ + 1);
  if (i < warmup) return uniform(candidates, i % (k_max_ + 1));
  if ((i - warmup) % kProbeInterval == kProbeInterval - 1) {
    return uniform(candidates, ((i - warmup) / kProbeInterval) % (k_max_ + 1));
  }
  return best(candidates);
}

DraftPlan SpeculationPolicy::uniform(const std::vector<DraftCandidate>& candidates, int64_t k) const {
  DraftPlan plan;
  for (const auto& c : candidates) {
    plan.drafts.push_back(std::clamp<int64_t>(c.pinned ? k_max_ : k, 0, c.budget));
    plan.step_k = std::max(plan.step_k, plan.drafts.back());
  }
  return plan;
}

DraftPlan SpeculationPolicy::best(const std::vector<DraftCandidate>& candidates) const {
  // reach[s][i]: probability that sequence s's drafts 1..i are all accepted (reach[s][0] = 1).
  std::vector<std::vector<double>> reach;
  for (const auto& c : candidates) {
    const std::vector<double> p = acceptance_.sequence(c.seq_id);
    std::vector<double> r{1.0};
    for (double pj : p) r.push_back(r.back() * pj);
    reach.push_back(std::move(r));
  }
  DraftPlan chosen = uniform(candidates, 0);
  Estimate base = estimate(candidates, reach, chosen);
  if (base.seconds <= 0) return uniform(candidates, k_max_);  // no timings yet: nothing to weigh
  double best_rate = base.tokens / base.seconds;
  for (int64_t k = 1; k <= k_max_; ++k) {
    DraftPlan plan = uniform(candidates, k);
    const Estimate full = estimate(candidates, reach, plan);
    trim(candidates, reach, full.seconds / full.tokens, plan);
    const Estimate e = estimate(candidates, reach, plan);
    if (e.tokens / e.seconds > best_rate) {
      best_rate = e.tokens / e.seconds;
      chosen = std::move(plan);
    }
  }
  return chosen;
}

void SpeculationPolicy::trim(const std::vector<DraftCandidate>& candidates,
                             const std::vector<std::vector<double>>& reach, double seconds_per_token,
                             DraftPlan& plan) const {
  const auto n = static_cast<int64_t>(candidates.size());
  for (size_t s = 0; s < candidates.size(); ++s) {
    int64_t& k = plan.drafts[s];
    while (!candidates[s].pinned && k > 0 && reach[s][k] * seconds_per_token < costs_.seconds_per_draft(n)) --k;
  }
  plan.step_k = *std::max_element(plan.drafts.begin(), plan.drafts.end());
}

SpeculationPolicy::Estimate SpeculationPolicy::estimate(const std::vector<DraftCandidate>& candidates,
                                                        const std::vector<std::vector<double>>& reach,
                                                        const DraftPlan& plan) const {
  double rows = 0, context = 0, tokens = 0, recursion_rows = 0, caught_up = 0;
  for (size_t s = 0; s < candidates.size(); ++s) {
    const int64_t k = plan.drafts[s];
    if (k > 0) caught_up += static_cast<double>(candidates[s].stashed);
    rows += 1 + k;
    context += static_cast<double>(candidates[s].context + k);
    for (int64_t i = 0; i <= k; ++i) tokens += reach[s][i];
    recursion_rows += std::max<int64_t>(k - 1, 0);
  }
  const double recursions = std::max<int64_t>(plan.step_k - 1, 0);
  // The next fill runs over every position this step computes (its emitted tokens), now or deferred,
  // and over the waiting positions of the sequences that draft.
  const auto n = static_cast<int64_t>(candidates.size());
  const double fixed_share = plan.step_k == 0 ? 1.0 / static_cast<double>(fill_every_) : 1.0;
  const double seconds = costs_.verify_seconds(n, rows, context) +
                         costs_.draft_seconds(n, tokens + caught_up, recursions, recursion_rows, fixed_share);
  return {tokens, seconds};
}

}  // namespace mtpserve
