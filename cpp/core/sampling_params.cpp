#include "core/sampling_params.h"

#include <cstdio>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace mtpserve {

namespace {

// Numbers as a stream prints them (%g for floating point), without a stream: ostringstream crashed in
// libstdc++'s locale code inside the extension on the lent GPUs' torch build.
template <typename T>
std::string text(T value) {
  if constexpr (std::is_floating_point_v<T>) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", static_cast<double>(value));
    return buf;
  } else {
    return std::to_string(value);
  }
}

template <typename T>
[[noreturn]] void reject(const char* field, T value, const char* expected) {
  throw std::invalid_argument(std::string("SamplingParams.") + field + " must be " + expected + ", got " + text(value));
}

// Written as !(in range) so that NaN is rejected too.
bool in_closed(double v, double lo, double hi) { return v >= lo && v <= hi; }

}  // namespace

void SamplingParams::validate() const {
  if (!(temperature >= 0.0)) reject("temperature", temperature, ">= 0");
  if (!(top_p > 0.0 && top_p <= 1.0)) reject("top_p", top_p, "in (0, 1]");
  if (top_k < -1) reject("top_k", top_k, ">= 1, or 0 / -1 to disable it");
  if (!in_closed(min_p, 0.0, 1.0)) reject("min_p", min_p, "in [0, 1]");
  if (!in_closed(presence_penalty, -2.0, 2.0)) reject("presence_penalty", presence_penalty, "in [-2, 2]");
  if (!in_closed(frequency_penalty, -2.0, 2.0)) reject("frequency_penalty", frequency_penalty, "in [-2, 2]");
  if (!(repetition_penalty > 0.0 && repetition_penalty <= 2.0)) {
    reject("repetition_penalty", repetition_penalty, "in (0, 2]");
  }
  for (const auto& [token, bias] : logit_bias) {
    if (token < 0) reject("logit_bias", token, "non-negative token ids");
    if (!in_closed(bias, -100.0, 100.0)) reject("logit_bias", bias, "in [-100, 100]");
  }
  if (prompt_logprobs < -1 || prompt_logprobs > 20) {
    reject("prompt_logprobs", prompt_logprobs, "in [0, 20], or -1 for none");
  }
  if (min_tokens < 0) reject("min_tokens", min_tokens, ">= 0");
  if (max_tokens <= 0) reject("max_tokens", max_tokens, ">= 1");
  if (logprobs < -1 || logprobs > 20) reject("logprobs", logprobs, "in [0, 20], or -1 for none");
  for (int64_t id : stop_token_ids) {
    if (id < 0) reject("stop_token_ids", id, "non-negative token ids");
  }
}

}  // namespace mtpserve
