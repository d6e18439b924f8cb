// How many thread-block clusters of 1..16 blocks the GPU holds at once for a block shaped like the wgmma
// attention kernel's (256 threads, one block per SM by its shared memory): the resident-cluster counts that decide
// whether a B = 16 call's 8 splits (16 tiles) could combine in clusters of 2, 4 or 8.
//   nvcc -arch=sm_90a -o /tmp/cluster_occupancy cluster_occupancy.cu && /tmp/cluster_occupancy
#include <cstdio>
#include <cuda_runtime.h>

__global__ void probe_kernel(float* out) {
  extern __shared__ float smem[];
  smem[threadIdx.x] = threadIdx.x;
  __syncthreads();
  if (out) out[blockIdx.x] = smem[(threadIdx.x + 1) % blockDim.x];
}

int main() {
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  const size_t smem = 200 * 1024;
  cudaFuncSetAttribute(probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  cudaFuncSetAttribute(probe_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  std::printf("%s, %d SMs, dynamic shared memory %zu bytes per block\n", prop.name, prop.multiProcessorCount, smem);
  for (int size : {1, 2, 3, 4, 6, 7, 8, 16}) {
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = 1;
    attr.val.clusterDim.y = 1;
    attr.val.clusterDim.z = size;
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(1, 16, size);
    config.blockDim = dim3(256);
    config.dynamicSmemBytes = smem;
    config.attrs = &attr;
    config.numAttrs = 1;
    int clusters = -1;
    const cudaError_t err = cudaOccupancyMaxActiveClusters(&clusters, probe_kernel, &config);
    std::printf("cluster of %2d blocks: %3d resident (%3d blocks) %s\n", size, clusters, clusters * size,
                err == cudaSuccess ? "" : cudaGetErrorString(err));
  }
  return 0;
}
