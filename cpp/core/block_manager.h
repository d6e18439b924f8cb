// Paged KV cache bookkeeping: which blocks each sequence holds, reference counts for blocks
// shared through the prefix cache, and the prefix cache itself.
//
// Prefix caching covers FULL, fully computed blocks only, so a shared block is never written
// again and no copy-on-write is needed. With a draft layer (MTP) a block also holds that layer's
// cache rows, which the engine may write later than the target's, or never (set_draft_layer). A
// cached block whose last holder frees it keeps its contents and stays findable until a fresh
// block is needed and it is evicted (least recently freed first). Block ids index the KV cache
// tensor [num_blocks, block_size, ...].
#pragma once

#include <cstdint>
#include <limits>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/block_hash.h"
#include "core/sequence.h"

namespace mtpserve {

class BlockManager {
 public:
  BlockManager(int64_t num_blocks, int64_t block_size, bool enable_prefix_cache);

  // Admission of a sequence with an empty block table: takes the cached blocks matching the
  // longest run of its full blocks (with a draft layer: see set_draft_layer), leaving at least one
  // token to compute, and sets num_computed_tokens and num_cached_tokens to the hit length, which
  // it returns. Counts the lookup in the prefix-cache counters. Allocates nothing beyond the hit.
  int64_t allocate_prompt(Sequence& seq);
  // What allocate_prompt would return, without taking blocks or counting.
  int64_t match_prefix(const Sequence& seq) const;
  // Whether allocate_prompt followed by reserve(seq, num_new_tokens) would succeed now.
  bool can_allocate_prompt(const Sequence& seq, int64_t num_new_tokens) const;

  // Ensures block_table covers positions [0, num_computed_tokens + num_new_tokens).
  bool can_reserve(const Sequence& seq, int64_t num_new_tokens) const;
  void reserve(Sequence& seq, int64_t num_new_tokens);  // throws std::runtime_error when out of blocks

  // After the engine advanced num_computed_tokens: registers each newly full, computed block, and
  // marks those within the first `complete` tokens as holding their draft-layer cache rows too (the
  // engine's say: rows whose fill waits, or never ran, are not complete). A complete block takes the
  // place in the cache of an incomplete one with the same contents.
  void commit(Sequence& seq, int64_t complete = std::numeric_limits<int64_t>::max());
  // Drops the sequence's references; clears block_table and num_computed_tokens.
  void free(Sequence& seq);

  int64_t num_blocks() const { return static_cast<int64_t>(blocks_.size()); }
  int64_t block_size() const { return block_size_; }
  bool prefix_cache_enabled() const { return enable_prefix_cache_; }
  // Blocks a sequence can get: never used, or cached but held by no one (evictable).
  int64_t num_free_blocks() const { return static_cast<int64_t>(free_.size() + evictable_.size()); }
  int64_t num_cached_blocks() const { return static_cast<int64_t>(cached_.size()); }
  double usage() const { return 1.0 - static_cast<double>(num_free_blocks()) / static_cast<double>(num_blocks()); }
  int32_t ref_count(int32_t block) const;
  int64_t num_blocks_for(int64_t num_tokens) const { return (num_tokens + block_size_ - 1) / block_size_; }

  uint64_t prefix_cache_queries() const { return queries_; }  // tokens looked up at admissions
  uint64_t prefix_cache_hits() const { return hits_; }        // of those, tokens served

  // With a draft layer (MTP) a sequence that drafts (Sequence::drafts) is served only blocks whose
  // draft-layer rows are complete. The draft layer's row at a block's last position depends on the
  // token after the block, which a match does not cover: the last matched block is served only
  // where that row was written with this sequence's next token, and is recomputed otherwise. A
  // sequence that never drafts is served every computed block.
  void set_draft_layer(bool on) { draft_layer_ = on; }

  // Tests only: keeps just these bits of every hash, forcing collisions (0: all collide).
  void set_hash_mask_for_testing(uint64_t mask) { hash_mask_ = mask; }

 private:
  struct Block {
    int32_t ref_count = 0;
    bool has_hash = false;  // full and computed: hash, parent and tokens are valid
    bool cached = false;    // cached_[hash] points at this block
    bool draft_complete = false;  // its draft-layer cache rows are written too
    int64_t next_token = -1;      // with them: the token after the block, which its last row was written with
    int64_t index = -1;     // position in the sequence, in blocks: KV depends on it (RoPE)
    BlockHash hash;
    BlockHash parent;
    std::vector<int64_t> tokens;  // compared on every hit so a collision can never share
    std::list<int32_t>::iterator lru_pos;
  };

  BlockHash hash_of(const BlockHash& parent, std::span<const int64_t> tokens) const;
  // Cached blocks holding seq's longest matching prefix, capped to leave one token.
  std::vector<int32_t> lookup(const Sequence& seq) const;
  int32_t take_fresh_block();
  // Makes block `id` (hashed) the cached one for its contents where none is, or where the cached one
  // lacks draft-layer rows that it has.
  void offer_to_cache(int32_t id);
  // Block `index` of seq's table holds its draft-layer rows, the last written with seq's next token.
  void mark_draft_complete(const Sequence& seq, int64_t index);
  void acquire_cached(int32_t id);
  void release(int32_t id);
  void forget_hash(Block& block);

  int64_t block_size_;
  bool enable_prefix_cache_;
  std::vector<Block> blocks_;
  std::vector<int32_t> free_;     // held by no one, no cached contents; back is handed out next
  std::list<int32_t> evictable_;  // cached, held by no one; front = least recently freed
  std::unordered_map<BlockHash, int32_t, BlockHashHasher> cached_;
  uint64_t queries_ = 0;
  uint64_t hits_ = 0;
  uint64_t hash_mask_ = ~0ULL;
  bool draft_layer_ = false;
};

}  // namespace mtpserve
