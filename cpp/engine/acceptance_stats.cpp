#include "engine/acceptance_stats.h"

#include <algorithm>
#include <cmath>

namespace mtpserve {

namespace {

// Engine-wide, an observation's weight halves after about 700 more at its position (several
// steps of a large batch); per sequence after about 7 of its own verifications, so a sequence
// that turns hard to predict stops drafting within a few steps.
constexpr double kEngineForget = 0.999;
constexpr double kSequenceForget = 0.9;
// Engine-wide, a position the step's drafts did not reach keeps this much of its weight: half after about 14 steps.
constexpr double kUntestedForget = 0.95;
// Weight of the engine-wide estimate in a sequence's, in observations.
constexpr double kSequencePrior = 4.0;
// Before any observation: one pseudo-observation, at even odds for draft 1 and at the estimate of the position
// before for the others.
constexpr double kEnginePrior = 1.0;
// A class's record is taken at its word from this many verifications of draft 1: about as many as prove a
// sequence's own record (weight 2 * kSequencePrior, forgetting 0.9), and it is taken one standard error high. At
// batch 1 a request retires after a few verifications of its own, so 64 took some ten requests, each paying its
// prompt's fill and its steps before retiring (offline at temperature 1.5, three or six requests in all).
constexpr double kClassKnown = 16.0;

// Positions 1..accepted were accepted; position accepted + 1, if drafted, was the first rejected; later ones were
// never tested.
int64_t tested_positions(int64_t drafts, int64_t accepted, int64_t k_max) {
  return std::min(std::min(drafts, accepted + 1), k_max);
}

// One standard error of an acceptance p estimated from `weight` verifications.
double standard_error(double p, double weight) { return std::sqrt(p * (1 - p) / (weight + 1)); }

}  // namespace

AcceptanceStats::AcceptanceStats(int64_t k_max)
    : k_max_(k_max),
      engine_{std::vector<double>(k_max, 0.0), std::vector<double>(k_max, 0.0)},
      engine_p_(mean(engine_)),
      engine_tested_(k_max, false) {}

void AcceptanceStats::observe(Counts& counts, double forget, int64_t drafts, int64_t accepted) const {
  const int64_t tested = tested_positions(drafts, accepted, k_max_);
  for (int64_t j = 0; j < tested; ++j) {
    counts.tried[j] = forget * counts.tried[j] + 1;
    counts.accepted[j] = forget * counts.accepted[j] + (j < accepted ? 1 : 0);
  }
}

AcceptanceStats::Counts& AcceptanceStats::entry(std::unordered_map<int64_t, Counts>& records, int64_t key) const {
  auto [it, added] = records.try_emplace(key);
  if (added) it->second = {std::vector<double>(k_max_, 0.0), std::vector<double>(k_max_, 0.0)};
  return it->second;
}

// A position is tested only where the plans draft it, so one that is not drafted is measured only on the probes.
// At even odds its prior made the last draft of k_max look worth less than it adds, which kept it from being
// drafted and measured: at batch 1 on a CPU draft 3 stayed near 0.63 (a run that did draft it measured 0.86-0.9),
// and the policy ran k = 2 where k = 3 emitted 7% more tokens per second. The position before is the better guess, and a
// wrong one is measured away by the drafts it brings.
std::vector<double> AcceptanceStats::mean(const Counts& counts) const {
  std::vector<double> p(k_max_);
  for (int64_t j = 0; j < k_max_; ++j) {
    const double prior = j == 0 ? 0.5 : p[j - 1];
    p[j] = (counts.accepted[j] + prior * kEnginePrior) / (counts.tried[j] + kEnginePrior);
  }
  return p;
}

void AcceptanceStats::record(int64_t seq_id, int64_t drafts, int64_t accepted) {
  observe(engine_, kEngineForget, drafts, accepted);
  engine_p_ = mean(engine_);
  std::fill_n(engine_tested_.begin(), tested_positions(drafts, accepted, k_max_), true);
  Counts& own = entry(sequences_, seq_id);
  observe(own, kSequenceForget, drafts, accepted);
  age_undrafted(own, drafts);
  if (const auto cls = class_of_.find(seq_id); cls != class_of_.end()) {
    observe(entry(classes_, cls->second), kEngineForget, drafts, accepted);
  }
}

void AcceptanceStats::age() {
  // A step that tested no draft ages nothing: where nothing drafts, the policy's probes measure the drafting. (At
  // k = 0 the fill's first draft, compared with the next token, is a test of draft 1.)
  if (!engine_tested_[0]) return;
  for (int64_t j = 1; j < k_max_; ++j) {
    if (!engine_tested_[j]) engine_.fade(j, kUntestedForget);
  }
  std::fill(engine_tested_.begin(), engine_tested_.end(), false);
  engine_p_ = mean(engine_);
}

void AcceptanceStats::age_undrafted(Counts& own, int64_t drafts) const {
  if (drafts < 1) return;
  for (int64_t j = drafts; j < k_max_; ++j) own.fade(j, kSequenceForget);
}

void AcceptanceStats::forget(int64_t seq_id) {
  sequences_.erase(seq_id);
  class_of_.erase(seq_id);
}

bool AcceptanceStats::classify(int64_t seq_id, int64_t sampling_class) {
  return class_of_.insert_or_assign(seq_id, sampling_class).second;
}

const AcceptanceStats::Counts* AcceptanceStats::known_class(int64_t sampling_class) const {
  const auto it = classes_.find(sampling_class);
  return it == classes_.end() || it->second.tried[0] < kClassKnown ? nullptr : &it->second;
}

std::optional<std::vector<double>> AcceptanceStats::class_high(int64_t sampling_class) const {
  const Counts* known = known_class(sampling_class);
  if (known == nullptr) return std::nullopt;
  std::vector<double> p = mean(*known);
  for (int64_t j = 0; j < k_max_; ++j) p[j] = std::min(1.0, p[j] + standard_error(p[j], known->tried[j]));
  return p;
}

void AcceptanceStats::lean_on_class(int64_t sampling_class) {
  if (++leaned_[sampling_class] < kClassTrust) return;
  classes_.erase(sampling_class);
  leaned_.erase(sampling_class);
}

std::vector<double> AcceptanceStats::sequence(int64_t seq_id) const {
  std::vector<double> p = engine_p_;
  auto it = sequences_.find(seq_id);
  if (it == sequences_.end()) return p;
  const Counts& own = it->second;
  for (int64_t j = 0; j < k_max_; ++j) {
    p[j] = (own.accepted[j] + kSequencePrior * p[j]) / (own.tried[j] + kSequencePrior);
  }
  return p;
}

std::vector<double> AcceptanceStats::sequence_low(int64_t seq_id) const {
  std::vector<double> p = sequence(seq_id);
  auto it = sequences_.find(seq_id);
  for (int64_t j = 0; j < k_max_; ++j) {
    const double weight = (it == sequences_.end() ? 0.0 : it->second.tried[j]) + kSequencePrior;
    p[j] = std::max(0.0, p[j] - standard_error(p[j], weight));
  }
  return p;
}

std::vector<double> AcceptanceStats::measured(int64_t seq_id) const {
  std::vector<double> p(k_max_, 1.0);
  auto it = sequences_.find(seq_id);
  if (it == sequences_.end()) return p;
  const Counts& own = it->second;
  for (int64_t j = 0; j < k_max_; ++j) {
    if (own.tried[j] >= kSequencePrior) p[j] = own.accepted[j] / own.tried[j];
  }
  return p;
}

bool AcceptanceStats::knows(int64_t seq_id) const { return draft_1_weight(seq_id) >= kSequencePrior; }

bool AcceptanceStats::proven(int64_t seq_id) const { return draft_1_weight(seq_id) >= 2 * kSequencePrior; }

bool AcceptanceStats::vouched_for(int64_t seq_id) const {
  if (knows(seq_id)) return true;
  const auto cls = class_of_.find(seq_id);
  return cls != class_of_.end() && known_class(cls->second) != nullptr;
}

double AcceptanceStats::draft_1_weight(int64_t seq_id) const {
  auto it = sequences_.find(seq_id);
  return it == sequences_.end() ? 0.0 : it->second.tried[0];
}

}  // namespace mtpserve
