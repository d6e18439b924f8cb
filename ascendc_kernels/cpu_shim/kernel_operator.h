#pragma once
// The CPU shim's stand-in for CANN's "kernel_operator.h": the subset of the Ascend C API that
// ascendc_kernels/ uses, same names and semantics, rules of the chip checked (docs/ascend.md).
// A kernel source compiled with -I ascendc_kernels/cpu_shim includes this instead of CANN's.
#include "shim_types.h"
#include "shim_core.h"
#include "shim_memory.h"
#include "shim_vector.h"
#include "shim_cube.h"
#include "shim_launch.h"
