#pragma once
// Tensor maps for the bulk tensor copies (sm_90): a row-major 16-bit [rows, cols] tensor read in boxes of
// 64 columns (one 128-byte row) by box_rows rows, landing in shared memory with the 128-byte swizzle that
// wgmma reads K-major operands in. Host code; the driver's encoder is reached through the runtime, so
// nothing links against libcuda.
#include <cuda.h>

#include <cstdint>

#include "kernels/cuda/dtype.cuh"

namespace mtpserve::kernels::cuda {

// Columns of one box: a 128-byte row of a 16-bit type, the widest the 128-byte swizzle takes.
constexpr int kMapBoxCols = 64;

// False when the copies cannot serve the tensor: not a 16-bit type, a base or row not 16-byte aligned, more
// rows than a coordinate holds, or no encoder.
bool encode_swizzled_map(CUtensorMap& map, const void* base, DType dtype, int64_t rows, int64_t cols, int box_rows);

}  // namespace mtpserve::kernels::cuda
