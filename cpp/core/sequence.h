// One request's token stream and its place in the paged KV cache. The engine owns Sequence
// objects; the Scheduler and BlockManager work on them by pointer/reference.
#pragma once

#include <cstdint>
#include <vector>

#include "core/sampling_params.h"

namespace mtpserve {

enum class SequenceStatus { kWaiting, kRunning, kFinished };
enum class FinishReason { kNone, kStop, kLength, kAbort };

struct Sequence {
  // Throws std::invalid_argument on an empty prompt or bad params.
  Sequence(int64_t id, std::vector<int64_t> prompt_tokens, SamplingParams params = {});

  int64_t id;
  std::vector<int64_t> tokens;  // prompt followed by the outputs so far
  int64_t num_prompt_tokens;
  // Tokens whose KV is in the cache. In decode this is num_tokens() - 1: the last sampled
  // token is fed to the next step.
  int64_t num_computed_tokens = 0;
  int64_t num_cached_tokens = 0;  // served by the prefix cache at the last admission
  std::vector<int32_t> block_table;
  SamplingParams params;
  SequenceStatus status = SequenceStatus::kWaiting;
  FinishReason finish_reason = FinishReason::kNone;
  // Speculative drafts to verify after last_token() in the next step; the engine fills it,
  // the scheduler may trim it (budget, memory) and clears it on preemption.
  std::vector<int64_t> draft_tokens;
  // May take drafts at some step. The engine sets it false for a sequence it retires from drafting
  // (SpeculationPolicy): it fills, stashes and drafts no more until a preemption recomputes it. One retired
  // before its prompt runs needs no draft layer's cache rows in the blocks a prefix hit serves it
  // (BlockManager::set_draft_layer).
  bool drafts = true;

  int64_t num_tokens() const { return static_cast<int64_t>(tokens.size()); }
  int64_t num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
  int64_t last_token() const { return tokens.back(); }
  // More than the last token remains to compute (a fresh, chunked or recomputed prefill).
  bool is_prefill() const { return num_computed_tokens < num_tokens() - 1; }
  bool is_finished() const { return status == SequenceStatus::kFinished; }
  void append_token(int64_t token) { tokens.push_back(token); }
};

}  // namespace mtpserve
