#pragma once
// What the engine streams back for a request: the tokens added since its last output.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/sampler.h"

namespace mtpserve {

// Speculative-decoding counters of one request (cumulative).
struct SpecCounters {
  int64_t drafts = 0;           // verify steps that carried drafts
  int64_t draft_tokens = 0;     // drafts proposed
  int64_t accepted_tokens = 0;  // drafts accepted
  std::vector<int64_t> accepted_per_position;
  std::vector<int64_t> steps_by_k;  // [k]: decode steps in which it verified k drafts
  // Times it was retired from drafting (its drafts did not pay: no more MTP fills or drafts); engine-wide,
  // the sequences retired.
  int64_t retired = 0;
};

struct RequestOutput {
  std::string request_id;
  std::vector<int64_t> token_ids;       // new since the last output
  std::vector<TokenLogprobs> logprobs;  // one per new token when logprobs were asked for
  // With the first output when prompt_logprobs were asked for: one per prompt token but the first.
  std::vector<TokenLogprobs> prompt_logprobs;
  bool finished = false;
  std::string finish_reason;            // "stop", "length", "abort" or "error" once finished
  std::optional<int64_t> stop_token;    // the stop_token_ids entry that ended it
  std::string error;
  int64_t num_prompt_tokens = 0;
  int64_t num_cached_tokens = 0;        // prompt tokens served by the prefix cache
  SpecCounters spec;
};

}  // namespace mtpserve
