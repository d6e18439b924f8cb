// Content hash of a full KV block for prefix caching. A block's hash chains its parent's
// hash with its own token ids, so equal hashes mean equal whole prefixes, not just equal
// blocks. 128 bits from two independently mixed 64-bit lanes keep accidental collisions
// out of reach; the BlockManager still compares tokens on every hit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace mtpserve {

struct BlockHash {
  uint64_t lo = 0;
  uint64_t hi = 0;
  bool operator==(const BlockHash&) const = default;
};

// The parent of a sequence's first block.
inline constexpr BlockHash kRootBlockHash{};

BlockHash hash_block(const BlockHash& parent, std::span<const int64_t> tokens);

struct BlockHashHasher {
  size_t operator()(const BlockHash& h) const { return static_cast<size_t>(h.lo ^ (h.hi * 0x9e3779b97f4a7c15ULL)); }
};

}  // namespace mtpserve
