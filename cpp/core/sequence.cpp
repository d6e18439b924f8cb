#include "core/sequence.h"

#include <stdexcept>
#include <string>
#include <utility>

namespace mtpserve {

Sequence::Sequence(int64_t id, std::vector<int64_t> prompt_tokens, SamplingParams params)
    : id(id),
      tokens(std::move(prompt_tokens)),
      num_prompt_tokens(static_cast<int64_t>(tokens.size())),
      params(std::move(params)) {
  if (tokens.empty()) {
    throw std::invalid_argument("sequence " + std::to_string(id) + ": the prompt is empty; give at least one token");
  }
  for (int64_t t : tokens) {
    if (t < 0) {
      throw std::invalid_argument("sequence " + std::to_string(id) + ": negative token id " + std::to_string(t) +
                                  " in the prompt");
    }
  }
  this->params.validate();
}

}  // namespace mtpserve
