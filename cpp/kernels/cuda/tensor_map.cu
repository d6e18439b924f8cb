#include "kernels/cuda/tensor_map.cuh"

#include <cudaTypedefs.h>  // the tensor-map encoder's signature

#include <climits>

namespace mtpserve::kernels::cuda {

namespace {

// The driver's tensor-map encoder, looked up once through the runtime.
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encoder = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    const bool ok = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) ==
                        cudaSuccess &&
                    found == cudaDriverEntryPointSuccess;
    return ok ? reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn) : nullptr;
  }();
  return encoder;
}

}  // namespace

bool encode_swizzled_map(CUtensorMap& map, const void* base, DType dtype, int64_t rows, int64_t cols, int box_rows) {
  const auto encode = tensor_map_encoder();
  const int64_t row_bytes = cols * 2;
  if (encode == nullptr || dtype == DType::kFloat32 || rows <= 0 || rows > INT32_MAX || cols <= 0 ||
      row_bytes % 16 != 0 || reinterpret_cast<uintptr_t>(base) % 16 != 0 || box_rows < 1 || box_rows > 256) {
    return false;
  }
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(row_bytes)};
  const cuuint32_t box[2] = {kMapBoxCols, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  const auto type = dtype == DType::kBFloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  return encode(&map, type, 2, const_cast<void*>(base), dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace mtpserve::kernels::cuda
