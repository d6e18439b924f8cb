#include "core/block_hash.h"

namespace mtpserve {

namespace {

// splitmix64's finaliser: a bijection with full avalanche.
uint64_t mix_a(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// murmur3's fmix64: different constants, so the two lanes do not collide together.
uint64_t mix_b(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  return x ^ (x >> 33);
}

}  // namespace

BlockHash hash_block(const BlockHash& parent, std::span<const int64_t> tokens) {
  uint64_t a = mix_a(parent.lo ^ 0x243f6a8885a308d3ULL);
  uint64_t b = mix_b(parent.hi ^ 0x13198a2e03707344ULL);
  for (int64_t token : tokens) {
    const auto t = static_cast<uint64_t>(token);
    a = mix_a(a ^ (t + 0xa4093822299f31d0ULL));
    b = mix_b((b + t) * 0x9e3779b97f4a7c15ULL + 0x082efa98ec4e6c89ULL);
  }
  // Fold the length in so that blocks of different sizes never alias.
  a = mix_a(a ^ tokens.size());
  b = mix_b(b + tokens.size());
  return {a, b};
}

}  // namespace mtpserve
