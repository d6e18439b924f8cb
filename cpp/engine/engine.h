#pragma once
// The engine loop: schedule -> build step -> execute -> sample -> update, on its own thread.
// add_request(s) / abort / get_outputs are thread-safe and never wait on a step.
// Under tensor parallelism (the target model's TensorParallel has size > 1) this is rank 0: it
// announces every forward to the workers (dist/step_broadcast.h) and sends them shutdown when
// it stops. A failed step there, or fail(), leaves the engine failed: every open request ends
// with the error, new ones are refused, and no collective is issued again.
// Under data-parallel attention with expert parallelism (EngineConfig::lockstep) this is one attention
// group's engine: it steps only when every group's engine agrees to (an idle one runs an empty step), and
// polls the others while idle (dist/step_lockstep.h).
#include <ATen/core/Tensor.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/block_manager.h"
#include "core/scheduler.h"
#include "engine/hidden_stash.h"
#include "engine/model_runner.h"
#include "engine/mtp_drafter.h"
#include "engine/request_output.h"
#include "engine/sampler.h"
#include "engine/speculation_policy.h"
#include "engine/step_timer.h"
#include "kernels/device_timer.h"

namespace mtpserve {

struct EngineConfig {
  int64_t block_size = 128;
  int64_t num_blocks = 0;
  bool enable_prefix_cache = true;
  SchedulerConfig scheduler;
  int64_t max_model_len = 0;
  std::vector<int64_t> eos_token_ids;
  uint64_t seed = 0;  // seeds requests that bring no seed of their own
  int64_t num_speculative_tokens = 0;  // k_max: most MTP drafts per step; 0 disables MTP
  SpeculationPolicyKind speculative_policy = SpeculationPolicyKind::kAdaptive;
  // Under the adaptive policy on one rank, a sequence given no drafts skips the MTP fill for up to
  // this many positions (their target hidden states wait in a stash on the device: max_seqs_per_batch
  // x this many rows) and catches up when it drafts again or the stash is full; 0: always fill.
  int64_t deferred_fill_positions = 64;
  // The policy plans the next drafts while the target forward runs, before the step's tokens are known (as if
  // each sequence gained one), instead of after, while the device waits for the drafts' launch: on a device that
  // runs the forward asynchronously (a GPU) the plan then costs the step nothing. The plan's acceptance
  // estimates then lack the step's own verifications.
  bool plan_ahead = false;
  // Decode steps of up to graph_max_batch sequences replay graphs captured at start-up, on devices
  // that have them (CUDA) and a model on one rank.
  bool enable_graph = true;
  int64_t graph_max_batch = 256;
  // With enable_graph, the target forwards of steps with prompt tokens replay graphs too, in pieces between
  // their attention calls (which run eagerly): one per padded row count, all captured at start-up.
  // On one rank only (under tensor parallelism such steps run eagerly).
  bool enable_prefill_graph = true;
  // Fills the masks of requests with a grammar (SamplingParams::constraint) and revises their drafts;
  // without one such requests are refused.
  std::shared_ptr<TokenMasker> token_masker;
  // Set on each attention group's engine when the groups share expert-parallel MoE layers.
  std::shared_ptr<StepLockstep> lockstep;
};

struct EngineStats {
  int64_t running = 0, waiting = 0;
  double kv_usage = 0;
  uint64_t prefix_queries = 0, prefix_hits = 0;
  uint64_t prompt_tokens = 0, generation_tokens = 0, steps = 0, preemptions = 0;
  // Cumulative seconds: device time of the target forwards and of MTP drafting (CUDA events on a
  // GPU), and host time from the target's launch until the step's tokens are known (sampling and
  // verification, waiting for the device included).
  double target_seconds = 0, sample_seconds = 0, draft_seconds = 0;
  // Host seconds of MTP drafting before its forwards are launched (the policy's plan, deferrals, building the
  // forwards' inputs): the device idles through them, and draft_seconds counts them too.
  double draft_host_seconds = 0;
  // Host seconds of the speculation policy's plans: a part of draft_host_seconds, or, where the engine plans
  // ahead (EngineConfig::plan_ahead), spent while the target forward runs.
  double plan_seconds = 0;
  // Wall seconds of whole steps (scheduling to outputs ready), and of the steps that computed prompt tokens:
  // against elapsed time they tell an engine that is the bottleneck from one that waits for its frontend.
  double step_seconds = 0, prompt_step_seconds = 0;
  uint64_t prompt_steps = 0;
  SpecCounters spec;  // spec.steps_by_k[k]: steps whose most drafts verified by a sequence was k
  // Steps that ran no MTP forward at all (every sequence deferred its fill), positions whose fill ran
  // late, in a catch-up, and positions whose fill never ran (dropped from the stash: DraftPlan::drop).
  uint64_t fill_skipped_steps = 0, caught_up_positions = 0, dropped_positions = 0;
};

class Engine {
 public:
  // With num_speculative_tokens > 0, `mtp` drafts and `mtp_cache` is its latent cache. `timer`
  // times the steps the speculation policy learns costs from (default: the host's steady clock).
  Engine(EngineConfig config, const DeepSeekV3& target, std::vector<at::Tensor> caches, const MtpLayer* mtp = nullptr,
         at::Tensor mtp_cache = {}, std::unique_ptr<StepTimer> timer = nullptr);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  struct NewRequest {
    std::string id;
    std::vector<int64_t> prompt;
    SamplingParams params;
  };
  // Throws std::invalid_argument for a bad request; nothing is queued then.
  void add_request(const std::string& id, std::vector<int64_t> prompt, SamplingParams params);
  // The requests together: all are checked before any is queued (a bad one throws, and none is), and the
  // next step sees all of them, as a batch's first step should (the offline API's generate).
  void add_requests(std::vector<NewRequest> requests);
  void abort(const std::string& id);
  // Tests only: request `id` drafts future_outputs[n .. n + k) at output index n instead of the
  // MTP layer's argmax (the MTP layer still runs), to drive acceptance on purpose.
  void override_drafts(const std::string& id, std::vector<int64_t> future_outputs);
  // Tests only: after `steps` more steps, the next one throws midway (after the target forward),
  // as a failing kernel would, so that tests can see how a fault inside a step reaches clients.
  void inject_fault_after(int64_t steps);
  // Tests only: the k of the i-th drafting step is schedule[i % size], whatever the policy; it drops
  // its sequences' waiting MTP fills instead of catching them up where unpaid[i % size]
  // (SpeculationPolicy::force_schedule).
  void force_k_schedule(std::vector<int64_t> schedule, std::vector<bool> unpaid = {});
  // Outputs gathered so far, waiting up to timeout_s for the first one.
  std::vector<RequestOutput> get_outputs(double timeout_s);
  EngineStats stats() const;
  size_t num_graphs() const { return runner_.num_graphs(); }
  // Marks the engine failed (a rank died): open requests end with `reason`, new ones are refused.
  void fail(const std::string& reason);
  // The reason the engine failed, if it has.
  std::optional<std::string> error() const;
  void shutdown();

 private:
  // Throws std::invalid_argument for what is wrong with the request on its own.
  void check_request(const NewRequest& request) const;

  struct Request {
    std::string id;
    std::unique_ptr<Sequence> seq;
    uint64_t seed;
    SpecCounters spec;
    std::vector<int64_t> forced_drafts;
    // The MTP fill's first draft when the policy gave the sequence none: compared with the next
    // token, it measures first-position acceptance at no cost.
    std::optional<int64_t> unused_draft;
    // The first position whose MTP fill never ran (its stash was dropped, or it retired): its MTP cache
    // has holes from there on (until a preemption recomputes it).
    std::optional<int64_t> unfilled_from;
    std::vector<TokenLogprobs> prompt_logprobs;  // for prompt tokens 1.., gathered chunk by chunk
    bool prompt_logprobs_sent = false;
  };

  // The draft phase's work, as the step cost model counts it (fill_rows include caught-up positions).
  struct DraftShape {
    int64_t num_seqs = 0, fill_rows = 0, caught_up = 0, recursions = 0, recursion_rows = 0;
    double launched_at = 0;  // timer_ seconds when the forwards were ready to launch
    double plan_seconds = 0;  // host seconds of the policy's plan
  };

  void loop();
  void drain_inbox();
  // Lockstep only: whether every group's engine agrees to run a step now (`stop` once any stops).
  struct Agreement {
    bool step = false, stop = false;
  };
  Agreement agree_step(bool stopping);
  // Stopped by another group's engine: open requests end, new ones are refused.
  void stop_with_others();
  // A step that schedules nothing (an abort, or an empty lockstep step) or fails midway is not counted in the
  // stats' steps.
  void step();
  void run_empty_step();
  void count_step(double seconds, bool decoding);
  // Samples (or verifies the drafts of) every scheduled sequence with samples this step.
  std::vector<SampledSequence> sample(const StepInput& input, const SchedulerOutput& plan, const at::Tensor& logits);
  std::vector<RequestOutput> apply_samples(const SchedulerOutput& plan, const StepInput& input,
                                           std::vector<SampledSequence>& sampled, std::vector<int64_t>& first_pairs,
                                           std::vector<int64_t>& finished);
  // Prompt logprobs of the prompt positions this step's prefill chunks computed (first time only).
  void gather_prompt_logprobs(const SchedulerOutput& plan, const StepInput& input);
  void record_verification(Request& request, int64_t drafts, int64_t accepted);
  // Counts the step's k (the most drafts a decoding sequence verifies; -1 where none decodes) engine-wide and
  // returns it (apply_samples counts each request's own).
  int64_t count_step_k(const SchedulerOutput& plan, const StepInput& input);
  // Feeds the last decode step's cost to the policy's cost model. Called once the next forward is launched, where
  // the host waits on the device anyway (2-3 us a step on the H200's host, which delayed the next step), and before
  // anything else reads the model.
  void record_verify_cost();

  // Drafting (engine_drafting.cpp, from here to count_in).
  // The policy's plan made while the target forward runs (EngineConfig::plan_ahead).
  struct PlannedDrafts {
    std::vector<int64_t> seq_ids;  // its candidates, in the step's order
    DraftPlan plan;
    double seconds = 0;  // host seconds of the plan
  };
  // Whether a scheduled sequence that has not finished drafts: asked while the target forward runs, where a sequence
  // that finishes in the step still counts (draft() then finds it finished), so that a step in which every sequence
  // retired skips drafting without another pass over them after sampling (up to 4 us at c = 64 on the H200's host).
  bool any_drafts(const SchedulerOutput& plan) const;
  // Drafts the next step's tokens (by `ahead`'s decisions where the engine planned ahead) and, for a decode-only
  // step (`decoding`), feeds the drafting time to the cost model; returns that time (0 where nothing drafts:
  // `drafts` is any_drafts' answer).
  double draft_next(const SchedulerOutput& plan, const StepInput& input, const std::vector<int64_t>& first_pairs,
                    double sampled_at, const std::optional<PlannedDrafts>& ahead, bool decoding, bool drafts);
  // Where EngineConfig::plan_ahead and a sequence drafts (`drafts`): the plan for the step's sequences that sample,
  // as if each gained one token (so it covers every sequence that drafts after the step, with budgets no smaller
  // than theirs).
  std::optional<PlannedDrafts> plan_ahead(const SchedulerOutput& plan, const StepInput& input, bool drafts);
  // `ahead`'s decisions for `candidates` (sequences it planned for, in its order), drafts within their budgets; a
  // candidate it did not plan for takes none.
  static DraftPlan fit_plan(const PlannedDrafts& ahead, const std::vector<DraftCandidate>& candidates);
  // The policy's plan for `candidates` beside `retired`, and the host seconds it took.
  std::pair<DraftPlan, double> timed_plan(const std::vector<DraftCandidate>& candidates, NonDrafting retired);
  // A scheduled sequence as a candidate for drafts after it gains `gained` tokens: none where it samples nothing
  // this step or has no draft budget left. plan_ahead and draft share this rule, so that a plan made ahead covers
  // every sequence that drafts after the step.
  std::optional<DraftCandidate> step_candidate(const Sequence& seq, bool samples, int64_t gained = 0) const;
  // Drafts of requests with a grammar, revised by the token masker (TokenMasker::revise_drafts).
  void revise_constrained_drafts(const std::vector<DraftRequest>& requests);
  DraftShape draft(const SchedulerOutput& plan, const StepInput& input, const std::vector<int64_t>& first_pairs,
                   const std::optional<PlannedDrafts>& ahead);
  // The requests whose fill runs this step, each with its stashed positions to catch up; the others'
  // fills are deferred into the stash: those that take no drafts after a decode or verify step (a
  // prefill chunk's fill runs at once, so that its blocks can be shared through the prefix cache) and
  // whose own acceptance is known (AcceptanceStats::knows).
  // `unused` (a request whose draft 1 is only measured) is filtered alike.
  // `retiring` requests are dropped: retire() has dropped their stash. `dropping` requests drop their
  // stash where it would be caught up (DraftPlan::drop), and stash anew. Only `deferring` requests stash
  // (DraftPlan::defer); the others fill.
  std::vector<DraftRequest> defer_fills(std::vector<DraftRequest> requests, const std::vector<bool>& decoded,
                                        std::vector<bool>& unused, const std::vector<bool>& retiring,
                                        const std::vector<bool>& dropping, const std::vector<bool>& deferring);
  // Drops the request's stashed positions: their MTP fill never runs.
  void drop_stash(Request& request);
  // Drops the request's stash and stops its fills and drafts (SpeculationPolicy's retire; Sequence::drafts), from
  // `first_pair` (this step's first position) on.
  void retire(Request& request, int64_t first_pair);
  // Every live request (waiting or running) as a row and its context: the load an arriving one meets.
  NonDrafting live_load() const;
  // Retires an arriving (or preempted, so recomputed) request before its prompt runs where its first plan
  // would retire it by its class's record (SpeculationPolicy::retires_on_arrival, `live` including it): it never
  // fills the MTP cache, and its prompt may be served blocks without MTP rows (Sequence::drafts).
  void retire_on_arrival(Request& request, NonDrafting live);
  // The first position of `seq` whose MTP cache row is not written (its fill is deferred, or was dropped).
  int64_t mtp_filled_until(const Sequence& seq) const;
  // `gained`: tokens the sequence is taken to have gained since (plan_ahead).
  int64_t draft_budget(const Sequence& seq, int64_t gained = 0) const;
  // The policy's view of a sequence with a draft budget, `stashed` positions waiting for their fill.
  DraftCandidate draft_candidate(const Sequence& seq, int64_t stashed, int64_t gained = 0) const;
  // The output tokens seq's request may reach: its weight in the policy's mean TPOT (DraftCandidate::output_tokens).
  int64_t output_tokens(const Sequence& seq) const;
  // Adds seq (having gained `gained` tokens this step) to a load of sequences the policy does not plan for.
  void count_in(const Sequence& seq, int64_t gained, NonDrafting& load) const;
  GraphPlan graph_plan() const;
  std::optional<StepShape> decode_shape(const SchedulerOutput& plan) const;
  bool fault_due();
  void fail_step(const SchedulerOutput& plan, const std::string& error);
  void fail_sequence(int64_t seq_id, const std::string& error);
  void fail_all(const std::string& error);
  void finish(Request& request, FinishReason reason, RequestOutput& out);
  // Appends sampled tokens up to the first stop; true when the request is finished.
  bool append_tokens(Request& request, const std::vector<int64_t>& tokens, RequestOutput& out);
  void publish(std::vector<RequestOutput> outputs);
  void refresh_stats();

  EngineConfig config_;
  const DeepSeekV3& target_;
  const TensorParallel& tp_;
  BlockManager blocks_;
  Scheduler scheduler_;
  ModelRunner runner_;
  Sampler sampler_;
  std::optional<MtpDrafter> drafter_;
  std::unique_ptr<kernels::DeviceTimer> target_timer_, draft_timer_;  // device time, for the stats
  std::optional<SpeculationPolicy> policy_;  // with drafter_
  struct VerifyCost {
    int64_t seqs, step_k, rows, context;
    double seconds;
  };
  std::optional<VerifyCost> unrecorded_verify_;  // record_verify_cost's
  std::optional<HiddenStash> stash_;         // where deferred fills wait (deferred_fill_positions)
  std::unique_ptr<StepTimer> timer_;  // wall time of a step's synchronised spans, for the policy
  std::mt19937_64 seeds_;
  std::unordered_map<int64_t, Request> requests_;  // by sequence id; loop thread only
  std::unordered_map<std::string, int64_t> ids_;  // request id -> sequence id; loop thread only
  int64_t next_seq_id_ = 0;
  std::atomic<int64_t> fault_after_{-1};  // inject_fault_after: steps left before the fault; -1: none

  mutable std::mutex inbox_mutex_;
  std::condition_variable inbox_cv_;
  std::vector<Request> pending_;
  std::vector<std::string> aborts_;
  std::vector<std::pair<std::string, std::vector<int64_t>>> overrides_;
  std::optional<std::pair<std::vector<int64_t>, std::vector<bool>>> k_schedule_;  // force_k_schedule's
  std::unordered_map<std::string, bool> live_ids_;  // ids accepted and not yet finished
  bool stopping_ = false;
  std::optional<std::string> failure_;  // set once; guarded by inbox_mutex_
  bool failed_handled_ = false;         // loop thread only
  bool lockstep_busy_ = false;          // the last lockstep agreement stepped; loop thread only

  std::mutex outbox_mutex_;
  std::condition_variable outbox_cv_;
  std::vector<RequestOutput> outbox_;

  mutable std::mutex stats_mutex_;
  EngineStats stats_;

  std::thread thread_;
};

}  // namespace mtpserve
