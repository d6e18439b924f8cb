#pragma once
#include "kernels/device_timer.h"

namespace mtpserve::kernels::cuda {

std::unique_ptr<DeviceTimer> make_device_timer();

}  // namespace mtpserve::kernels::cuda
