#pragma once
// Hopper's warpgroup matrix multiply (PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"),
// for bf16/fp16 operands with fp32 accumulators: the shared-memory descriptors of 128-byte-swizzled operands,
// the fence / commit / wait around the asynchronous products, and the shapes the kernels use. Device code
// for the sm_90a pass only (callers keep their kernels' bodies out of the plain sm_90 pass).
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/dtype.cuh"

namespace mtpserve::kernels::cuda::wgmma {

// The descriptor of a 128-byte-swizzled operand: start address, leading and stride byte offsets (each >> 4),
// swizzle mode 1. K-major operands step their 8-row groups by 1024 bytes (stride); an MN-major operand of one
// 64-column atom steps its 8-row groups by 1024 bytes too.
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t leading, uint32_t stride) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(leading >> 4) << 16) |
         (static_cast<uint64_t>(stride >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most N committed groups of this warpgroup are still running. ptxas keeps the products
// asynchronous only where every path from a product to a use of its registers passes a wait: a wait and a use under
// the same runtime test (if (x) wait; ... if (x) use) read to it as a use without a wait, and it then serializes
// every wgmma of the kernel (info C7514 / C7515; a WARPGROUP.DEPBAR after each HGMMA in the SASS).
template <int N = 0>
__device__ __forceinline__ void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Keeps the compiler from moving accumulator reads and writes across the asynchronous products.
template <int N>
__device__ __forceinline__ void fence_operands(float (&r)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i) {
#pragma unroll
    for (int c = 0; c < 4; ++c) asm volatile("" : "+f"(r[i][c])::"memory");
  }
}

#define MTPSERVE_ACC16(d)                                                                                    \
  "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), \
      "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), \
      "+f"(d[3][2]), "+f"(d[3][3])
#define MTPSERVE_ACC32(d) MTPSERVE_ACC16(d), MTPSERVE_ACC16((d + 4))

#define MTPSERVE_WGMMA_SS_N32(TYPE)                                                                         \
  asm volatile(                                                                                             \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"                                                          \
      "wgmma.mma_async.sync.aligned.m64n32k16.f32." TYPE "." TYPE " "                                      \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, 0, 0;\n}\n" \
      : MTPSERVE_ACC16(d)                                                                                   \
      : "l"(a), "l"(b), "r"(accumulate))

// d (64 x 32) (+)= A (64 x 16, K-major in shared memory) * B (16 x 32, K-major in shared memory); d's n8 tile
// i holds, per thread, rows gid and gid + 8 of its warp's 16 (c >> 1) and columns 8i + 2tq + (c & 1).
template <typename T>
__device__ __forceinline__ void mma_ss_n32(float (&d)[4][4], uint64_t a, uint64_t b, int accumulate) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    MTPSERVE_WGMMA_SS_N32("bf16");
  } else {
    MTPSERVE_WGMMA_SS_N32("f16");
  }
}

#define MTPSERVE_WGMMA_RS_N64(TYPE)                                                                          \
  asm volatile(                                                                                              \
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                                             \
      "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " "                                       \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, " \
      "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"     \
      : MTPSERVE_ACC32(d)                                                                                    \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b))

// d (64 x 64) += A (64 x 16, registers) * B (16 x 64, MN-major in shared memory).
template <typename T>
__device__ __forceinline__ void mma_rs_n64(float (*d)[4], const uint32_t (&a)[4], uint64_t b) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    MTPSERVE_WGMMA_RS_N64("bf16");
  } else {
    MTPSERVE_WGMMA_RS_N64("f16");
  }
}

#define MTPSERVE_WGMMA_SS_N64(TYPE)                                                                          \
  asm volatile(                                                                                              \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                                           \
      "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " "                                       \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, " \
      "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"                     \
      : MTPSERVE_ACC32(d)                                                                                    \
      : "l"(a), "l"(b), "r"(accumulate))

// d (64 x 64) (+)= A (64 x 16, K-major in shared memory) * B (16 x 64, K-major in shared memory).
template <typename T>
__device__ __forceinline__ void mma_ss_n64(float (*d)[4], uint64_t a, uint64_t b, int accumulate) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    MTPSERVE_WGMMA_SS_N64("bf16");
  } else {
    MTPSERVE_WGMMA_SS_N64("f16");
  }
}

#define MTPSERVE_WGMMA_RS_N64_KB(TYPE)                                                                       \
  asm volatile(                                                                                              \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                                           \
      "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " "                                       \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, " \
      "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"     \
      : MTPSERVE_ACC32(d)                                                                                    \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate))

// mma_ss_n64 with A from registers (as mma_rs_n64's), B K-major.
template <typename T>
__device__ __forceinline__ void mma_rs_n64_kb(float (*d)[4], const uint32_t (&a)[4], uint64_t b, int accumulate) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    MTPSERVE_WGMMA_RS_N64_KB("bf16");
  } else {
    MTPSERVE_WGMMA_RS_N64_KB("f16");
  }
}

}  // namespace mtpserve::kernels::cuda::wgmma
