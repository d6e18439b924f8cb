#pragma once
// A thread block cluster's distributed shared memory (sm_90): the cluster barrier, and stores into another block's
// shared memory. Device code, no torch headers.
#include <cstdint>

namespace mtpserve::kernels::cuda {

// Every thread of every block of the cluster arrives, then waits for the others: what each wrote to shared memory
// (its own or another block's) before it is seen by all after it.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

// The address in block `rank` of the cluster of what lies at shared address `local` in this block.
__device__ __forceinline__ uint32_t cluster_address(uint32_t local, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(local), "r"(rank));
  return remote;
}

__device__ __forceinline__ void cluster_store(uint32_t address, float x) {
  asm volatile("st.shared::cluster.f32 [%0], %1;\n" ::"r"(address), "f"(x) : "memory");
}

__device__ __forceinline__ void cluster_store(uint32_t address, float x, float y) {
  asm volatile("st.shared::cluster.v2.f32 [%0], {%1, %2};\n" ::"r"(address), "f"(x), "f"(y) : "memory");
}

}  // namespace mtpserve::kernels::cuda
