#pragma once
// Counter-based uniforms: draw n of request seed s is a pure function of (s, n, stream), so a
// seeded request samples the same tokens whatever else shares its batch. Host and device code
// share this header, so a CUDA sampler draws exactly the uniforms the CPU sampler draws.
#include <cstdint>

#if defined(__CUDACC__)
#define MTPSERVE_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define MTPSERVE_HOST_DEVICE inline
#endif

namespace mtpserve {

MTPSERVE_HOST_DEVICE uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform in [0, 1) with 53 random bits.
MTPSERVE_HOST_DEVICE double uniform(uint64_t seed, uint64_t draw, uint64_t stream = 0) {
  const uint64_t bits = splitmix64(splitmix64(seed) ^ splitmix64(draw * 0x100000001B3ull + stream));
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

// Independent uniform streams of one draw: plain sampling and bonus tokens use kDrawStream, the
// speculative accept test kAcceptStream, and the replacement draw after a rejection kResampleStream.
constexpr uint64_t kDrawStream = 0;
constexpr uint64_t kAcceptStream = 1;
constexpr uint64_t kResampleStream = 2;

}  // namespace mtpserve
