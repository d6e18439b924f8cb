#include "engine/executor.h"

#include <ATen/ATen.h>

namespace mtpserve {

ExecutorOutput Executor::run(const StepInput& input) const {
  auto hidden = target_.forward(input.token_ids, input.positions, caches_, input.attention);
  return {target_.logits(hidden.index_select(0, input.sample_rows)), hidden};
}

}  // namespace mtpserve
