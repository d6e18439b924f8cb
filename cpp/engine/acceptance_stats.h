#pragma once
// How often MTP drafts are accepted, per draft position: p[j] = P(draft j + 1 accepted | drafts
// 1..j accepted), engine-wide and per sequence. Both forget old observations (the load and the
// text change); a sequence's estimate leans on the engine-wide one until it has its own record,
// so a new sequence starts from the engine's experience.
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

namespace mtpserve {

class AcceptanceStats {
 public:
  explicit AcceptanceStats(int64_t k_max);

  // A verification of `drafts` drafts of which the first `accepted` were accepted.
  void record(int64_t seq_id, int64_t drafts, int64_t accepted);
  // A decode step went by (SpeculationPolicy::plan). If it tested draft 1, each engine-wide position past the
  // first that it did not test loses weight, so that what a k no longer drafted measured long ago gives way to
  // the prior (the position before) and the plans draft that position again and measure it. Without this a
  // position measured poorly early on stayed so until a probe: at batch 1 on a CPU the first requests left draft 3
  // at 0.16-0.23, and the policy ran k = 1 for hundreds of steps on sequences whose drafts were accepted 9 times in
  // 10, where fixed k = 3 took 27% less time per token.
  void age();
  void forget(int64_t seq_id);

  // Engine-wide p[j], j = 0..k_max-1.
  const std::vector<double>& engine() const { return engine_p_; }
  // The sequence's p[j]: its own record shrunk towards the engine-wide estimate.
  std::vector<double> sequence(int64_t seq_id) const;
  // sequence()'s p[j] less one standard error: what its drafts can be counted on for, on the evidence so far
  // (a few drafts accepted early on say little).
  std::vector<double> sequence_low(int64_t seq_id) const;
  // The sequence's own record alone, to judge its drafts by what they did: at the positions where its
  // record weighs less than the prior, its drafts count as accepted (benefit of the doubt).
  std::vector<double> measured(int64_t seq_id) const;
  // Whether the sequence's own record of draft 1 weighs at least as much as the engine-wide estimate
  // it is shrunk towards.
  bool knows(int64_t seq_id) const;
  // Whether it weighs twice that (about 16 verifications): enough to judge its drafts against an estimate that
  // still favours them.
  bool proven(int64_t seq_id) const;
  // Whether its acceptance is known from its own record (knows) or from its sampling class's, once that is known
  // (class_high): a new sequence of a known class need not measure its own before it drafts.
  bool vouched_for(int64_t seq_id) const;

  // A sequence's sampling class (SpeculationPolicy::sampling_class): its verifications from now on also count
  // towards its class's record, which forgets like the engine-wide one. Whether it was of no class before.
  bool classify(int64_t seq_id, int64_t sampling_class);
  // The class's p[j] plus one standard error, once its record of draft 1 weighs kClassKnown verifications;
  // before that, none.
  std::optional<std::vector<double>> class_high(int64_t sampling_class) const;
  // A new sequence of the class took its word instead of drafting (SpeculationPolicy). The kClassTrust-th forgets
  // the record, so that where every new sequence takes it, the class is measured anew: until its new record is
  // known its new sequences draft, then the next kClassTrust take its word again. (A record that instead weighed a
  // little less with each sequence hovered at the threshold once it first fell below it: at temperature 1.5, on a
  // CPU filling every step at concurrency 16 four in ten new sequences then drafted, and on an H200 at concurrency
  // 64 4% of the steps ran the MTP fill.)
  static constexpr int64_t kClassTrust = 1000;
  void lean_on_class(int64_t sampling_class);

 private:
  struct Counts {
    std::vector<double> tried, accepted;  // forgetting sums per position
    // Position j's record keeps `keep` of its weight, and its estimate moves towards the prior.
    void fade(int64_t j, double keep) {
      tried[j] *= keep;
      accepted[j] *= keep;
    }
  };
  void observe(Counts& counts, double forget, int64_t drafts, int64_t accepted) const;
  // A sequence's positions past the `drafts` it was verified on forget as if tested: what it measured there before
  // it stopped drafting them gives way to the engine-wide estimate, which age() keeps current. Otherwise a
  // sequence that drafted poorly at draft 2 early on kept that record for as long as it drafted one (at batch 1 on
  // a CPU, 61 of 188 plans of k = 1 had their own draft-2 or -3 estimate 15 points or more below the engine's).
  void age_undrafted(Counts& own, int64_t drafts) const;
  // The record under `key`, empty where there was none.
  Counts& entry(std::unordered_map<int64_t, Counts>& records, int64_t key) const;
  // The class's record where it is known (kClassKnown verifications of draft 1), else none.
  const Counts* known_class(int64_t sampling_class) const;
  // p[j] from the record, with one pseudo-observation of the prior (see acceptance_stats.cpp).
  std::vector<double> mean(const Counts& counts) const;
  // The weight of the sequence's own record of draft 1 (0 without one).
  double draft_1_weight(int64_t seq_id) const;

  int64_t k_max_;
  Counts engine_;
  std::vector<double> engine_p_;  // mean(engine_): every plan reads it once per sequence
  std::vector<bool> engine_tested_;  // per position: tested since the last age()
  std::unordered_map<int64_t, Counts> sequences_;
  std::unordered_map<int64_t, int64_t> class_of_;  // by sequence id
  std::unordered_map<int64_t, Counts> classes_;
  std::unordered_map<int64_t, int64_t> leaned_;  // by class: new sequences that took its record's word
};

}  // namespace mtpserve
