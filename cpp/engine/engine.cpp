#include "engine/engine.h"

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>

#include <algorithm>
#include <chrono>
#if defined(__linux__)
#include <pthread.h>
#endif
#include <stdexcept>
#include <tuple>
#include <unordered_set>

#include "dist/step_broadcast.h"
#include "engine/prompt_logprobs.h"
#include "engine/step_input.h"
#include "kernels/kernel_ops.h"

namespace mtpserve {

namespace {

const char* reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
    default: return "";
  }
}

// A name in top -H and /proc/<pid>/task: benchmarks match a slow server instance with where this thread ran.
void name_engine_thread() {
#if defined(__linux__)
  pthread_setname_np(pthread_self(), "mtpserve-engine");
#endif
}

void count_verification(SpecCounters& spec, int64_t num_drafts, int64_t accepted) {
  spec.drafts += 1;
  spec.draft_tokens += num_drafts;
  spec.accepted_tokens += accepted;
  spec.accepted_per_position.resize(std::max<int64_t>(spec.accepted_per_position.size(), num_drafts), 0);
  for (int64_t j = 0; j < accepted; ++j) spec.accepted_per_position[j] += 1;
}

// A decode step in which a request verified k drafts.
void count_k(SpecCounters& spec, int64_t k) {
  spec.steps_by_k.resize(std::max<size_t>(spec.steps_by_k.size(), k + 1), 0);
  spec.steps_by_k[k] += 1;
}

// The context lengths of a step's sequences, summed: the latent cache its attention reads.
int64_t context_tokens(const SchedulerOutput& plan) {
  int64_t tokens = 0;
  for (const auto& s : plan.scheduled) tokens += s.seq->num_computed_tokens + s.num_new_tokens;
  return tokens;
}

// Decode and verify steps only: the cost model never predicts a step with prefill chunks.
bool decode_only(const SchedulerOutput& plan) {
  return std::none_of(plan.scheduled.begin(), plan.scheduled.end(), [](const auto& s) { return s.is_prefill; });
}

// How long an idle engine under lockstep waits for work before it asks the other groups whether they step.
constexpr auto kLockstepPoll = std::chrono::milliseconds(20);

bool contains(const std::vector<int64_t>& ids, int64_t token) {
  return std::find(ids.begin(), ids.end(), token) != ids.end();
}

}  // namespace

Engine::Engine(EngineConfig config, const DeepSeekV3& target, std::vector<at::Tensor> caches, const MtpLayer* mtp,
               at::Tensor mtp_cache, std::unique_ptr<StepTimer> timer)
    : config_(std::move(config)),
      target_(target),
      tp_(target.tp()),
      blocks_(config_.num_blocks, config_.block_size, config_.enable_prefix_cache),
      scheduler_(config_.scheduler, blocks_),
      runner_(target, std::move(caches), config_.num_speculative_tokens > 0 ? mtp : nullptr, std::move(mtp_cache),
              config_.lockstep.get()),
      sampler_(runner_.device(), config_.token_masker),
      target_timer_(kernels::ops_for(runner_.device()).make_device_timer()),
      draft_timer_(kernels::ops_for(runner_.device()).make_device_timer()),
      timer_(timer ? std::move(timer) : std::make_unique<SteadyStepTimer>()),
      seeds_(config_.seed) {
  if (tp_.enabled() && tp_.rank() != 0) {
    throw std::invalid_argument("the Engine runs on tensor-parallel rank 0; ranks 1..N-1 run a Worker");
  }
  if (config_.num_speculative_tokens > 0) {
    blocks_.set_draft_layer(true);
    if (!runner_.has_mtp()) throw std::invalid_argument("num_speculative_tokens > 0 needs an MTP layer and its cache");
    drafter_.emplace(runner_, config_.block_size);
    // The stash lives on rank 0's runner alone: under tensor parallelism every fill runs.
    if (config_.speculative_policy == SpeculationPolicyKind::kAdaptive && !tp_.enabled() &&
        config_.deferred_fill_positions > 0) {
      stash_.emplace(config_.scheduler.max_seqs_per_batch, config_.deferred_fill_positions);
      runner_.allocate_stash(stash_->rows());
    }
    policy_.emplace(config_.speculative_policy, config_.num_speculative_tokens,
                    stash_ ? config_.deferred_fill_positions : 1);
    stats_.spec.steps_by_k.assign(config_.num_speculative_tokens + 1, 0);
  }
  if (config_.enable_graph) runner_.capture_graphs(graph_plan());
  thread_ = std::thread([this] {
    name_engine_thread();
    loop();
  });
}

Engine::~Engine() { shutdown(); }

void Engine::shutdown() {
  {
    std::lock_guard lock(inbox_mutex_);
    stopping_ = true;
  }
  inbox_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  runner_.release_graphs();
}

void Engine::add_request(const std::string& id, std::vector<int64_t> prompt, SamplingParams params) {
  std::vector<NewRequest> one;
  one.push_back({id, std::move(prompt), std::move(params)});
  add_requests(std::move(one));
}

void Engine::add_requests(std::vector<NewRequest> requests) {
  std::unordered_set<std::string> ids;
  for (auto& r : requests) {
    r.params.validate();
    check_request(r);
    if (!ids.insert(r.id).second) throw std::invalid_argument("request id '" + r.id + "' is given twice");
  }
  std::lock_guard lock(inbox_mutex_);
  if (stopping_) throw std::runtime_error("the engine is shut down");
  if (failure_) throw std::runtime_error("the engine failed: " + *failure_);
  for (const auto& r : requests) {
    if (live_ids_.contains(r.id)) throw std::invalid_argument("request id '" + r.id + "' is already in use");
  }
  for (auto& r : requests) {
    live_ids_.emplace(r.id, true);
    const uint64_t seed = r.params.seed ? *r.params.seed : seeds_();
    auto seq = std::make_unique<Sequence>(next_seq_id_++, std::move(r.prompt), std::move(r.params));
    pending_.push_back(Request{r.id, std::move(seq), seed});
  }
  inbox_cv_.notify_all();
}

void Engine::check_request(const NewRequest& request) const {
  const std::string& id = request.id;
  const std::vector<int64_t>& prompt = request.prompt;
  const SamplingParams& params = request.params;
  const int64_t n = static_cast<int64_t>(prompt.size()), vocab = target_.config().vocab_size;
  if (n == 0) throw std::invalid_argument("request '" + id + "': the prompt is empty");
  if (n >= config_.max_model_len) {
    throw std::invalid_argument("request '" + id + "': the prompt has " + std::to_string(n) +
                                " tokens but max_model_len is " + std::to_string(config_.max_model_len) +
                                ", which leaves no room to generate");
  }
  for (int64_t t : prompt) {
    if (t < 0 || t >= vocab) {
      throw std::invalid_argument("request '" + id + "': prompt token id " + std::to_string(t) +
                                  " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
    }
  }
  if (params.constraint && !config_.token_masker) {
    throw std::invalid_argument("request '" + id + "': it has a grammar, but the engine was built without a token "
                                "masker (EngineConfig.token_masker) to apply grammars");
  }
  if (params.prompt_logprobs >= 0 && tp_.enabled()) {
    throw std::invalid_argument("request '" + id + "': prompt logprobs are not supported under tensor parallelism");
  }
  for (const auto& [t, bias] : params.logit_bias) {
    if (t >= vocab) {
      throw std::invalid_argument("request '" + id + "': logit_bias token id " + std::to_string(t) +
                                  " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
    }
  }
  const int64_t blocks_needed = (n + config_.block_size) / config_.block_size;
  if (blocks_needed > config_.num_blocks) {
    throw std::invalid_argument("request '" + id + "': the prompt needs " + std::to_string(blocks_needed) +
                                " KV-cache blocks but the cache has " + std::to_string(config_.num_blocks));
  }
}

void Engine::abort(const std::string& id) {
  std::lock_guard lock(inbox_mutex_);
  aborts_.push_back(id);
  inbox_cv_.notify_all();
}

void Engine::override_drafts(const std::string& id, std::vector<int64_t> future_outputs) {
  std::lock_guard lock(inbox_mutex_);
  overrides_.emplace_back(id, std::move(future_outputs));
}

void Engine::inject_fault_after(int64_t steps) { fault_after_.store(steps); }

bool Engine::fault_due() {
  int64_t left = fault_after_.load();
  while (left >= 0 && !fault_after_.compare_exchange_weak(left, left - 1)) {
  }
  return left == 0;
}

void Engine::force_k_schedule(std::vector<int64_t> schedule, std::vector<bool> unpaid) {
  if (!drafter_) throw std::invalid_argument("force_k_schedule needs num_speculative_tokens > 0");
  std::lock_guard lock(inbox_mutex_);
  k_schedule_.emplace(std::move(schedule), std::move(unpaid));
}

std::vector<RequestOutput> Engine::get_outputs(double timeout_s) {
  std::unique_lock lock(outbox_mutex_);
  outbox_cv_.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return !outbox_.empty(); });
  return std::exchange(outbox_, {});
}

void Engine::fail(const std::string& reason) {
  {
    std::lock_guard lock(inbox_mutex_);
    if (!failure_) failure_ = reason;
  }
  inbox_cv_.notify_all();
}

std::optional<std::string> Engine::error() const {
  std::lock_guard lock(inbox_mutex_);
  return failure_;
}

EngineStats Engine::stats() const {
  std::lock_guard lock(stats_mutex_);
  return stats_;
}

void Engine::loop() {
  // This thread allocates and launches on the model's device, which need not be the current one (cuda:1).
  const c10::DeviceGuard device(runner_.device());
  while (true) {
    std::optional<std::string> failure;
    bool stopping = false;
    {
      std::unique_lock lock(inbox_mutex_);
      const auto ready = [&] {
        return stopping_ || (failure_ && !failed_handled_) || (!failure_ && !pending_.empty()) || !aborts_.empty() ||
               (!failure_ && scheduler_.has_unfinished());
      };
      if (config_.lockstep) {
        // While any group steps, straight on to the next agreement; idle, wait a little for work first.
        if (!lockstep_busy_) inbox_cv_.wait_for(lock, kLockstepPoll, ready);
      } else {
        inbox_cv_.wait(lock, ready);
      }
      stopping = stopping_;
      failure = failure_;
    }
    // Under lockstep a stopping engine tells the other groups first; a failed one never exchanges again.
    if (stopping && (!config_.lockstep || failure)) break;
    drain_inbox();
    if (failure) {
      fail_all(*failure);  // and never step (nor issue a collective) again
      failed_handled_ = true;
      refresh_stats();
      continue;
    }
    if (config_.lockstep) {
      const Agreement agreed = agree_step(stopping);
      lockstep_busy_ = agreed.step;
      if (agreed.stop) {
        if (!stopping) stop_with_others();
        break;
      }
      if (!agreed.step) continue;
    }
    step();
    refresh_stats();
  }
  if (tp_.enabled() && !error()) {
    try {
      send_step(tp_, StepKind::kShutdown);
    } catch (const std::exception&) {
      // a worker is gone already: nothing left to stop
    }
  }
}

Engine::Agreement Engine::agree_step(bool stopping) {
  try {
    const auto agreed = config_.lockstep->agree({scheduler_.has_unfinished() ? 1 : 0, stopping ? 1 : 0});
    return {agreed[0] != 0, agreed[1] != 0};
  } catch (const std::exception& e) {
    fail(std::string("the attention groups' lockstep failed: ") + e.what());
    return {};
  }
}

void Engine::stop_with_others() {
  {
    std::lock_guard lock(inbox_mutex_);
    stopping_ = true;
  }
  fail_all("the server is shutting down (another attention group's engine stopped)");
}

void Engine::drain_inbox() {
  std::vector<Request> added;
  std::vector<std::string> aborted;
  std::vector<std::pair<std::string, std::vector<int64_t>>> overrides;
  {
    std::lock_guard lock(inbox_mutex_);
    added.swap(pending_);
    aborted.swap(aborts_);
    overrides.swap(overrides_);
    if (k_schedule_) {
      auto [schedule, unpaid] = *std::exchange(k_schedule_, std::nullopt);
      policy_->force_schedule(std::move(schedule), std::move(unpaid));
    }
  }
  std::vector<int64_t> arrived;
  for (auto& request : added) {
    const int64_t seq_id = request.seq->id;
    arrived.push_back(seq_id);
    ids_[request.id] = seq_id;
    Sequence* seq = request.seq.get();
    requests_.emplace(seq_id, std::move(request));
    scheduler_.add(seq);
    std::lock_guard lock(stats_mutex_);
    stats_.prompt_tokens += seq->num_prompt_tokens;
  }
  if (policy_ && !arrived.empty()) {
    record_verify_cost();
    const NonDrafting live = live_load();
    for (int64_t seq_id : arrived) retire_on_arrival(requests_.at(seq_id), live);
  }
  std::vector<std::pair<std::string, std::vector<int64_t>>> not_yet_added;
  for (auto& [id, future] : overrides) {
    if (auto it = ids_.find(id); it != ids_.end()) {
      requests_.at(it->second).forced_drafts = std::move(future);
    } else {
      not_yet_added.emplace_back(id, std::move(future));  // the request is still on its way in
    }
  }
  if (!not_yet_added.empty()) {
    std::lock_guard lock(inbox_mutex_);
    for (auto& entry : not_yet_added) overrides_.push_back(std::move(entry));
  }
  std::vector<RequestOutput> outputs;
  for (const auto& id : aborted) {
    auto it = ids_.find(id);
    if (it == ids_.end()) continue;  // finished already, or never accepted
    Request& request = requests_.at(it->second);
    RequestOutput out{request.id};
    finish(request, FinishReason::kAbort, out);
    requests_.erase(request.seq->id);
    outputs.push_back(std::move(out));
  }
  publish(std::move(outputs));
}

void Engine::step() {
  // What a step costs the policy runs from here to its published outputs: scheduling, stop checks and
  // publishing are per-step costs too (a tenth of a step or more on a GPU at batch 1), and leaving
  // them out made larger k look dearer than they are.
  timer_->start();
  SchedulerOutput plan;
  try {
    plan = scheduler_.schedule();
  } catch (const SequenceTooLarge& e) {
    fail_sequence(e.seq_id, e.what());
    plan = {};
  }
  if (!plan.preempted.empty()) {
    // A preempted sequence recomputes its prompt and outputs, filling the MTP cache anew: its holes close,
    // and a retired one may draft again, unless its class's record retires it on arrival once more.
    record_verify_cost();
    const NonDrafting live = live_load();
    for (Sequence* seq : plan.preempted) {
      if (stash_) stash_->take(seq->id);
      Request& request = requests_.at(seq->id);
      request.unfilled_from.reset();
      seq->drafts = true;
      retire_on_arrival(request, live);
    }
    std::lock_guard lock(stats_mutex_);
    stats_.preemptions += plan.preempted.size();
  }
  if (plan.empty()) {
    if (config_.lockstep) run_empty_step();
    return;
  }
  try {
    StepInput input = build_step_input(plan.scheduled, config_.block_size, decode_shape(plan), runner_.eager_rows());
    target_timer_->start();
    at::Tensor logits = runner_.run_target(input);
    target_timer_->stop();
    record_verify_cost();
    const int64_t step_k = policy_ ? count_step_k(plan, input) : -1;
    const int64_t context = policy_ ? context_tokens(plan) : 0;
    const bool drafts = any_drafts(plan);
    gather_prompt_logprobs(plan, input);
    if (fault_due()) throw std::runtime_error("injected fault (Engine::inject_fault_after, tests only)");
    const double launched_at = timer_->seconds();
    const std::optional<PlannedDrafts> ahead = plan_ahead(plan, input, drafts);
    std::vector<SampledSequence> sampled = sample(input, plan, logits);
    std::vector<int64_t> first_pairs, finished;  // finished requests are dropped once the step is done
    std::vector<RequestOutput> outputs = apply_samples(plan, input, sampled, first_pairs, finished);
    const double sampled_at = timer_->seconds();
    const bool decoding = decode_only(plan);
    const double drafting = drafter_ ? draft_next(plan, input, first_pairs, sampled_at, ahead, decoding, drafts) : 0.0;
    {
      std::lock_guard lock(stats_mutex_);
      stats_.target_seconds += target_timer_->seconds();
      stats_.sample_seconds += sampled_at - launched_at;
    }
    for (const auto& s : plan.scheduled) {
      if (!s.seq->is_finished()) blocks_.commit(*s.seq, mtp_filled_until(*s.seq));
    }
    for (int64_t id : finished) requests_.erase(id);
    count_step(timer_->seconds(), decoding);
    publish(std::move(outputs));
    if (policy_ && decoding) {
      unrecorded_verify_ = VerifyCost{static_cast<int64_t>(plan.scheduled.size()), std::max<int64_t>(step_k, 0),
                                      input.query_start.back(), context, timer_->seconds() - drafting};
    }
  } catch (const std::exception& e) {
    // A step that failed midway leaves the caches and drafts half-written, and under tensor
    // parallelism the ranks out of step (no further collective may be issued): the engine fails
    // rather than run on. It is marked failed before the step's requests are told, so that a
    // client that reads their error finds the engine unhealthy already.
    const std::string reason =
        std::string(tp_.enabled() ? "tensor-parallel step failed: " : "engine step failed: ") + e.what();
    fail(reason);
    fail_step(plan, reason);
  }
}

void Engine::record_verify_cost() {
  if (!unrecorded_verify_) return;
  const VerifyCost& c = *unrecorded_verify_;
  policy_->costs().record_verify(c.seqs, c.step_k, c.rows, c.context, c.seconds);
  unrecorded_verify_.reset();
}

void Engine::count_step(double seconds, bool decoding) {
  // Before the step's outputs are published: whoever has them sees the step in the stats (a benchmark's
  // scrape, a test that counts the steps its request took).
  std::lock_guard lock(stats_mutex_);
  stats_.steps += 1;
  stats_.step_seconds += seconds;
  if (!decoding) {
    stats_.prompt_step_seconds += seconds;
    stats_.prompt_steps += 1;
  }
}

void Engine::run_empty_step() {
  try {
    runner_.run_empty_target();
    if (drafter_) runner_.run_drafts({});
  } catch (const std::exception& e) {
    fail(std::string("empty lockstep step failed: ") + e.what());
  }
}

// Appends each sequence's sampled tokens (accepted drafts included), advances its computed tokens and
// collects its output; `first_pairs` gets each scheduled sequence's computed tokens before the step and
// `finished` the requests this step finished.
std::vector<RequestOutput> Engine::apply_samples(const SchedulerOutput& plan, const StepInput& input,
                                                 std::vector<SampledSequence>& sampled,
                                                 std::vector<int64_t>& first_pairs, std::vector<int64_t>& finished) {
  std::vector<RequestOutput> outputs;
  size_t next = 0;
  for (size_t i = 0; i < plan.scheduled.size(); ++i) {
    Sequence& seq = *plan.scheduled[i].seq;
    first_pairs.push_back(seq.num_computed_tokens);
    const int64_t samples = input.num_samples[i];
    if (samples == 0) {
      seq.num_computed_tokens += plan.scheduled[i].num_new_tokens;
      continue;
    }
    Request& request = requests_.at(seq.id);
    SampledSequence& result = sampled[next++];
    if (const auto unused = std::exchange(request.unused_draft, std::nullopt); unused && samples == 1) {
      policy_->acceptance().record(seq.id, 1, result.tokens[0] == *unused ? 1 : 0);
    }
    if (policy_ && !plan.scheduled[i].is_prefill) count_k(request.spec, samples - 1);
    RequestOutput out{request.id};
    out.num_prompt_tokens = seq.num_prompt_tokens;
    out.num_cached_tokens = seq.num_cached_tokens;
    if (samples == 1) {
      seq.num_computed_tokens += plan.scheduled[i].num_new_tokens;
    } else {
      record_verification(request, samples - 1, result.accepted);
      seq.draft_tokens.clear();
      seq.num_computed_tokens += static_cast<int64_t>(result.tokens.size());
    }
    if (seq.params.logprobs >= 0) out.logprobs = std::move(result.logprobs);
    if (seq.params.prompt_logprobs >= 0 && !request.prompt_logprobs_sent) {
      out.prompt_logprobs = std::move(request.prompt_logprobs);
      request.prompt_logprobs_sent = true;
    }
    const bool done = append_tokens(request, result.tokens, out);
    out.spec = request.spec;
    if (done) {
      out.logprobs.resize(std::min(out.logprobs.size(), out.token_ids.size()));
      finished.push_back(seq.id);
    }
    outputs.push_back(std::move(out));
  }
  return outputs;
}

std::vector<SampledSequence> Engine::sample(const StepInput& input, const SchedulerOutput& plan,
                                           const at::Tensor& logits) {
  std::vector<SampleRequest> requests;
  for (size_t i = 0; i < plan.scheduled.size(); ++i) {
    const int64_t samples = input.num_samples[i];
    if (samples == 0) continue;
    const Request& r = requests_.at(plan.scheduled[i].seq->id);
    const Sequence& seq = *r.seq;
    const std::span<const int64_t> tokens(seq.tokens);
    requests.push_back({&seq.params, tokens.first(seq.num_prompt_tokens), tokens.subspan(seq.num_prompt_tokens),
                        config_.eos_token_ids, std::span<const int64_t>(seq.draft_tokens).first(samples - 1), r.seed,
                        static_cast<uint64_t>(seq.num_output_tokens()), input.first_sample[i]});
  }
  return sampler_.sample(logits, requests);
}

void Engine::gather_prompt_logprobs(const SchedulerOutput& plan, const StepInput& input) {
  std::vector<int64_t> rows, tokens, top_n;
  std::vector<Request*> owners;
  for (size_t i = 0; i < plan.scheduled.size(); ++i) {
    const Sequence& seq = *plan.scheduled[i].seq;
    if (seq.params.prompt_logprobs < 0) continue;
    Request& request = requests_.at(seq.id);
    // Row p predicts prompt token p + 1; a recomputed (preempted) prompt adds nothing twice.
    const int64_t start = seq.num_computed_tokens;
    const int64_t from = std::max(start, static_cast<int64_t>(request.prompt_logprobs.size()));
    const int64_t to = std::min(start + plan.scheduled[i].num_new_tokens, seq.num_prompt_tokens - 1);
    for (int64_t p = from; p < to; ++p) {
      rows.push_back(input.query_start[i] + p - start);
      tokens.push_back(seq.tokens[p + 1]);
      top_n.push_back(seq.params.prompt_logprobs);
      owners.push_back(&request);
    }
  }
  if (rows.empty()) return;
  auto logits = runner_.target_logits(at::tensor(rows, at::kLong).to(runner_.device()));
  auto entries = token_logprobs(logits, tokens, top_n);
  for (size_t r = 0; r < entries.size(); ++r) owners[r]->prompt_logprobs.push_back(std::move(entries[r]));
}

void Engine::record_verification(Request& request, int64_t drafts, int64_t accepted) {
  count_verification(request.spec, drafts, accepted);
  policy_->acceptance().record(request.seq->id, drafts, accepted);
  std::lock_guard lock(stats_mutex_);
  count_verification(stats_.spec, drafts, accepted);
}

int64_t Engine::count_step_k(const SchedulerOutput& plan, const StepInput& input) {
  int64_t step_k = -1;
  for (size_t i = 0; i < plan.scheduled.size(); ++i) {
    if (plan.scheduled[i].is_prefill || input.num_samples[i] == 0) continue;
    step_k = std::max(step_k, input.num_samples[i] - 1);
  }
  if (step_k < 0) return step_k;
  std::lock_guard lock(stats_mutex_);
  stats_.spec.steps_by_k[step_k] += 1;
  return step_k;
}

GraphPlan Engine::graph_plan() const {
  GraphPlan plan;
  const int64_t most = std::min(config_.graph_max_batch, config_.scheduler.max_seqs_per_batch);
  // 1, 2, 4, 8, 16, 24, 32, then steps of 16, and the most itself.
  for (int64_t size : {1, 2, 4, 8, 16, 24}) {
    if (size < most) plan.batch_sizes.push_back(size);
  }
  for (int64_t size = 32; size < most; size += 16) plan.batch_sizes.push_back(size);
  if (most >= 1) plan.batch_sizes.push_back(most);
  plan.num_speculative_tokens = config_.num_speculative_tokens;
  // Padded rows may reach k positions past the last real one.
  plan.max_context_len = config_.max_model_len + config_.num_speculative_tokens + 1;
  plan.table_width = (plan.max_context_len + config_.block_size - 1) / config_.block_size;
  plan.max_prefill_rows = config_.enable_prefill_graph ? config_.scheduler.max_tokens_per_batch : 0;
  return plan;
}

// A step of decodes only (each sequence feeds its last token and its drafts) has a graph's shape,
// padded to the smallest captured one that holds it.
std::optional<StepShape> Engine::decode_shape(const SchedulerOutput& plan) const {
  int64_t rows = 0;
  for (const auto& s : plan.scheduled) {
    const Sequence& seq = *s.seq;
    if (seq.num_computed_tokens != seq.num_tokens() - 1 ||
        s.num_new_tokens != 1 + static_cast<int64_t>(seq.draft_tokens.size())) {
      return std::nullopt;
    }
    rows = std::max(rows, s.num_new_tokens);
  }
  return runner_.target_shape(static_cast<int64_t>(plan.scheduled.size()), rows);
}

bool Engine::append_tokens(Request& request, const std::vector<int64_t>& tokens, RequestOutput& out) {
  Sequence& seq = *request.seq;
  for (int64_t token : tokens) {
    seq.append_token(token);
    out.token_ids.push_back(token);
    std::optional<FinishReason> reason;
    if (!seq.params.ignore_eos && contains(config_.eos_token_ids, token)) {
      reason = FinishReason::kStop;
    } else if (contains(seq.params.stop_token_ids, token)) {
      reason = FinishReason::kStop;
      out.stop_token = token;
    } else if (seq.num_output_tokens() >= seq.params.max_tokens || seq.num_tokens() >= config_.max_model_len) {
      reason = FinishReason::kLength;
    }
    if (reason) {
      finish(request, *reason, out);
      return true;
    }
  }
  return false;
}

void Engine::finish(Request& request, FinishReason reason, RequestOutput& out) {
  scheduler_.finish(request.seq.get(), reason);
  out.finished = true;
  out.finish_reason = reason_name(reason);
  ids_.erase(request.id);
  if (policy_) policy_->acceptance().forget(request.seq->id);
  if (stash_) stash_->take(request.seq->id);
  std::lock_guard lock(inbox_mutex_);
  live_ids_.erase(request.id);
}

void Engine::fail_sequence(int64_t seq_id, const std::string& error) {
  auto it = requests_.find(seq_id);
  if (it == requests_.end()) return;
  RequestOutput out{it->second.id};
  finish(it->second, FinishReason::kAbort, out);
  out.finish_reason = "error";
  out.error = error;
  requests_.erase(it);
  publish({std::move(out)});
}

void Engine::fail_step(const SchedulerOutput& plan, const std::string& error) {
  std::vector<RequestOutput> outputs;
  for (const auto& s : plan.scheduled) {
    auto it = requests_.find(s.seq->id);
    if (it == requests_.end()) continue;
    RequestOutput out{it->second.id};
    finish(it->second, FinishReason::kAbort, out);
    out.finish_reason = "error";
    out.error = error;
    requests_.erase(it);
    outputs.push_back(std::move(out));
  }
  publish(std::move(outputs));
}

void Engine::fail_all(const std::string& error) {
  std::vector<RequestOutput> outputs;
  std::vector<int64_t> seq_ids;
  for (const auto& [seq_id, request] : requests_) seq_ids.push_back(seq_id);
  std::sort(seq_ids.begin(), seq_ids.end());
  for (int64_t seq_id : seq_ids) {
    Request& request = requests_.at(seq_id);
    RequestOutput out{request.id};
    finish(request, FinishReason::kAbort, out);
    out.finish_reason = "error";
    out.error = error;
    outputs.push_back(std::move(out));
    requests_.erase(seq_id);
  }
  publish(std::move(outputs));
}

void Engine::publish(std::vector<RequestOutput> outputs) {
  if (outputs.empty()) return;
  // Stats first: whoever reads an output then sees the engine state that produced it.
  refresh_stats();
  {
    std::lock_guard lock(stats_mutex_);
    for (const auto& out : outputs) stats_.generation_tokens += out.token_ids.size();
  }
  std::lock_guard lock(outbox_mutex_);
  for (auto& out : outputs) outbox_.push_back(std::move(out));
  outbox_cv_.notify_all();
}

void Engine::refresh_stats() {
  std::lock_guard lock(stats_mutex_);
  stats_.running = scheduler_.num_running();
  stats_.waiting = scheduler_.num_waiting();
  stats_.kv_usage = blocks_.usage();
  stats_.prefix_queries = blocks_.prefix_cache_queries();
  stats_.prefix_hits = blocks_.prefix_cache_hits();
}

}  // namespace mtpserve
