#pragma once
#include "kernels/step_timer.h"

namespace mtpserve::kernels::cuda {

std::unique_ptr<StepTimer> make_step_timer();

}  // namespace mtpserve::kernels::cuda
