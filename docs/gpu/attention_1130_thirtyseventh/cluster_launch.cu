// What a launch costs by its shape, with no work in it: 128 blocks of 256 threads that leave at once, laid out
// in grids of one to three dimensions, launched with or without clusters (along x or z), with 0 or 217 KB of
// dynamic shared memory, and with an 8-byte or a 448-byte parameter (the attention kernel passes its launch
// struct and a 128-byte tensor map), replayed from a CUDA graph of 100 launches. Prints the µs per launch. A
// diagnostic for the attention kernel's B = 16 call (grid 16 x 1 x 8, clusters of 1 x 1 x 8 blocks of 217 KB), not
// part of mtpserve.
//   nvcc -std=c++17 -O2 -arch=sm_90a -o /tmp/cluster_launch cluster_launch.cu && /tmp/cluster_launch
#include <cstdio>
#include <cuda_runtime.h>

struct Big {
  int* never;
  char pad[440];
};

__global__ void small_param(int* never) {
  if (never != nullptr) *never = 1;
}

__global__ void big_param(const __grid_constant__ Big big) {
  if (big.never != nullptr) *big.never = 1;
}

template <typename Kernel, typename Arg>
static float per_launch_us(Kernel kernel, Arg arg, dim3 grid, dim3 cluster, int smem) {
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = cluster.x;
  attr.val.clusterDim.y = cluster.y;
  attr.val.clusterDim.z = cluster.z;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(256);
  config.dynamicSmemBytes = smem;
  config.attrs = &attr;
  config.numAttrs = cluster.x * cluster.y * cluster.z > 1 ? 1 : 0;
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  config.stream = stream;
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal);
  for (int i = 0; i < 100; ++i) cudaLaunchKernelEx(&config, kernel, arg);
  cudaStreamEndCapture(stream, &graph);
  if (cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) return -1.0f;
  cudaEvent_t start, end;
  cudaEventCreate(&start);
  cudaEventCreate(&end);
  for (int i = 0; i < 3; ++i) cudaGraphLaunch(exec, stream);
  float best = 1e9f;
  for (int rep = 0; rep < 20; ++rep) {
    cudaEventRecord(start, stream);
    cudaGraphLaunch(exec, stream);
    cudaEventRecord(end, stream);
    cudaEventSynchronize(end);
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, start, end);
    best = ms < best ? ms : best;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  return cudaGetLastError() == cudaSuccess ? best * 1000.0f / 100.0f : -1.0f;
}

int main() {
  for (auto kernel : {reinterpret_cast<const void*>(small_param), reinterpret_cast<const void*>(big_param)}) {
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 217 * 1024);
  }
  const struct {
    dim3 grid, cluster;
  } shapes[] = {{{128, 1, 1}, {1, 1, 1}}, {{128, 1, 1}, {8, 1, 1}}, {{16, 1, 8}, {1, 1, 1}}, {{16, 1, 8}, {1, 1, 8}},
                {{8, 1, 16}, {8, 1, 1}},  {{64, 1, 2}, {1, 1, 2}}, {{2, 1, 64}, {2, 1, 1}}};
  printf("| grid | cluster | dynamic smem KB | 8-byte parameter: us per launch | 448-byte parameter |\n");
  printf("|---|---|---|---|---|\n");
  Big big{};
  for (const auto& s : shapes) {
    for (int smem_kb : {0, 217}) {
      printf("| %u x %u x %u | %u x %u x %u | %d | %.2f | %.2f |\n", s.grid.x, s.grid.y, s.grid.z, s.cluster.x,
             s.cluster.y, s.cluster.z, smem_kb, per_launch_us(small_param, static_cast<int*>(nullptr), s.grid, s.cluster, smem_kb * 1024),
             per_launch_us(big_param, big, s.grid, s.cluster, smem_kb * 1024));
    }
  }
  return 0;
}
