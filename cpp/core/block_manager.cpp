#include "core/block_manager.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

namespace mtpserve {

BlockManager::BlockManager(int64_t num_blocks, int64_t block_size, bool enable_prefix_cache)
    : block_size_(block_size), enable_prefix_cache_(enable_prefix_cache) {
  if (num_blocks <= 0 || num_blocks > std::numeric_limits<int32_t>::max()) {
    throw std::invalid_argument("BlockManager: num_blocks must be in [1, 2^31), got " + std::to_string(num_blocks));
  }
  if (block_size <= 0) {
    throw std::invalid_argument("BlockManager: block_size must be >= 1, got " + std::to_string(block_size));
  }
  blocks_.resize(num_blocks);
  // free_ hands out from the back: fill it so block 0 goes first, which keeps tests readable.
  free_.reserve(num_blocks);
  for (int64_t id = num_blocks - 1; id >= 0; --id) free_.push_back(static_cast<int32_t>(id));
}

BlockHash BlockManager::hash_of(const BlockHash& parent, std::span<const int64_t> tokens) const {
  BlockHash h = hash_block(parent, tokens);
  return {h.lo & hash_mask_, h.hi & hash_mask_};
}

std::vector<int32_t> BlockManager::lookup(const Sequence& seq) const {
  std::vector<int32_t> hit;
  // Prompt logprobs come from the prefill's logits: such a prompt is computed, never served.
  if (!enable_prefix_cache_ || seq.params.prompt_logprobs >= 0) return hit;
  // Leave at least one token to compute: the step that computes it produces the next token.
  const int64_t max_blocks = (seq.num_tokens() - 1) / block_size_;
  const bool needs_draft_rows = draft_layer_ && seq.drafts;
  BlockHash parent = kRootBlockHash;
  for (int64_t i = 0; i < max_blocks; ++i) {
    std::span<const int64_t> tokens(seq.tokens.data() + i * block_size_, block_size_);
    const BlockHash h = hash_of(parent, tokens);
    auto it = cached_.find(h);
    if (it == cached_.end()) break;
    const Block& b = blocks_[it->second];
    // A hash hit is only a candidate: the exact tokens, position and parent must match too.
    if (b.index != i || b.parent != parent || !std::ranges::equal(b.tokens, tokens)) break;
    if (needs_draft_rows && !b.draft_complete) break;
    hit.push_back(it->second);
    parent = h;
  }
  const auto hit_tokens = static_cast<int64_t>(hit.size()) * block_size_;
  if (needs_draft_rows && !hit.empty() && blocks_[hit.back()].next_token != seq.tokens[hit_tokens]) hit.pop_back();
  return hit;
}

int64_t BlockManager::match_prefix(const Sequence& seq) const {
  return static_cast<int64_t>(lookup(seq).size()) * block_size_;
}

int64_t BlockManager::allocate_prompt(Sequence& seq) {
  if (!seq.block_table.empty()) {
    throw std::invalid_argument("allocate_prompt: sequence " + std::to_string(seq.id) + " already holds " +
                                std::to_string(seq.block_table.size()) + " blocks; free it first");
  }
  const std::vector<int32_t> hit = lookup(seq);
  for (int32_t id : hit) {
    acquire_cached(id);
    seq.block_table.push_back(id);
  }
  const int64_t hit_tokens = static_cast<int64_t>(hit.size()) * block_size_;
  if (enable_prefix_cache_) {
    queries_ += static_cast<uint64_t>(seq.num_tokens());
    hits_ += static_cast<uint64_t>(hit_tokens);
  }
  seq.num_computed_tokens = hit_tokens;
  seq.num_cached_tokens = hit_tokens;
  return hit_tokens;
}

bool BlockManager::can_allocate_prompt(const Sequence& seq, int64_t num_new_tokens) const {
  const std::vector<int32_t> hit = lookup(seq);
  // Hit blocks that nobody holds are counted as free now but stop being free once taken.
  const auto evictable_hits = std::ranges::count_if(hit, [&](int32_t id) { return blocks_[id].ref_count == 0; });
  const int64_t hit_tokens = static_cast<int64_t>(hit.size()) * block_size_;
  const int64_t fresh = num_blocks_for(hit_tokens + num_new_tokens) - static_cast<int64_t>(hit.size());
  return fresh <= num_free_blocks() - evictable_hits;
}

bool BlockManager::can_reserve(const Sequence& seq, int64_t num_new_tokens) const {
  const int64_t needed = num_blocks_for(seq.num_computed_tokens + num_new_tokens);
  return needed - static_cast<int64_t>(seq.block_table.size()) <= num_free_blocks();
}

void BlockManager::reserve(Sequence& seq, int64_t num_new_tokens) {
  if (num_new_tokens < 0) {
    throw std::invalid_argument("reserve: num_new_tokens must be >= 0, got " + std::to_string(num_new_tokens));
  }
  const int64_t needed = num_blocks_for(seq.num_computed_tokens + num_new_tokens);
  const int64_t missing = needed - static_cast<int64_t>(seq.block_table.size());
  if (missing > num_free_blocks()) {
    throw std::runtime_error("out of KV blocks: sequence " + std::to_string(seq.id) + " needs " +
                             std::to_string(missing) + " more, " + std::to_string(num_free_blocks()) +
                             " free; check can_reserve first or give the cache more blocks");
  }
  while (static_cast<int64_t>(seq.block_table.size()) < needed) seq.block_table.push_back(take_fresh_block());
}

void BlockManager::commit(Sequence& seq, int64_t complete) {
  if (!enable_prefix_cache_) return;
  const int64_t computed = std::min(seq.num_computed_tokens, seq.num_tokens());
  const int64_t table = static_cast<int64_t>(seq.block_table.size());
  const int64_t full = std::min(computed / block_size_, table);
  // A block's last draft-layer row is written with the token after the block, so none is complete
  // before that token exists.
  const int64_t rows = std::min({computed, complete, seq.num_tokens() - 1});
  const int64_t full_complete = std::min(rows / block_size_, table);
  // Hashed blocks form a prefix of the table, and complete ones a prefix of those: walk back to the
  // end of each, so that each commit costs only the blocks hashed or completed since the last one.
  int64_t first = full;
  while (first > 0 && !blocks_[seq.block_table[first - 1]].has_hash) --first;
  int64_t first_complete = full_complete;
  while (first_complete > 0 && !blocks_[seq.block_table[first_complete - 1]].draft_complete) --first_complete;
  for (int64_t i = first_complete; i < std::min(full_complete, first); ++i) {
    mark_draft_complete(seq, i);
    offer_to_cache(seq.block_table[i]);
  }
  for (int64_t i = first; i < full; ++i) {
    Block& b = blocks_[seq.block_table[i]];
    std::span<const int64_t> tokens(seq.tokens.data() + i * block_size_, block_size_);
    b.parent = i == 0 ? kRootBlockHash : blocks_[seq.block_table[i - 1]].hash;
    b.hash = hash_of(b.parent, tokens);
    b.index = i;
    b.has_hash = true;
    b.tokens.assign(tokens.begin(), tokens.end());
    if (i < full_complete) mark_draft_complete(seq, i);
    offer_to_cache(seq.block_table[i]);
  }
}

void BlockManager::mark_draft_complete(const Sequence& seq, int64_t index) {
  Block& b = blocks_[seq.block_table[index]];
  b.draft_complete = true;
  b.next_token = seq.tokens[(index + 1) * block_size_];
}

void BlockManager::offer_to_cache(int32_t id) {
  Block& b = blocks_[id];
  if (b.cached) return;
  auto [it, inserted] = cached_.emplace(b.hash, id);
  if (!inserted) {
    // Another block holds these contents already (computed concurrently) or, with a collision,
    // other contents: this one stays private, unless it brings draft-layer rows the other lacks.
    Block& other = blocks_[it->second];
    const bool same = other.index == b.index && other.parent == b.parent && other.tokens == b.tokens;
    if (!same || other.draft_complete || !b.draft_complete) return;
    other.cached = false;
    if (other.ref_count == 0) {  // no one holds it: its contents are no longer findable
      evictable_.erase(other.lru_pos);
      forget_hash(other);
      free_.push_back(it->second);
    }
    it->second = id;
  }
  b.cached = true;
}

void BlockManager::free(Sequence& seq) {
  // Tail first: the least recently freed is evicted first, so a sequence's tail goes before
  // its prefix, which other prompts are likelier to share and which its tail needs to hit.
  for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) release(*it);
  seq.block_table.clear();
  seq.num_computed_tokens = 0;
}

int32_t BlockManager::ref_count(int32_t block) const {
  if (block < 0 || block >= num_blocks()) {
    throw std::out_of_range("block " + std::to_string(block) + " is not in [0, " + std::to_string(num_blocks()) + ")");
  }
  return blocks_[block].ref_count;
}

int32_t BlockManager::take_fresh_block() {
  int32_t id;
  // Never-cached blocks first, so cached contents live as long as possible.
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else if (!evictable_.empty()) {
    id = evictable_.front();
    evictable_.pop_front();
    forget_hash(blocks_[id]);
  } else {
    throw std::runtime_error("out of KV blocks: all " + std::to_string(num_blocks()) + " are in use");
  }
  blocks_[id].ref_count = 1;
  return id;
}

void BlockManager::acquire_cached(int32_t id) {
  Block& b = blocks_[id];
  if (b.ref_count == 0) evictable_.erase(b.lru_pos);
  ++b.ref_count;
}

void BlockManager::release(int32_t id) {
  Block& b = blocks_[id];
  if (--b.ref_count > 0) return;
  if (b.cached) {
    b.lru_pos = evictable_.insert(evictable_.end(), id);
  } else {
    forget_hash(b);
    free_.push_back(id);
  }
}

void BlockManager::forget_hash(Block& b) {
  if (b.cached) cached_.erase(b.hash);
  b.cached = false;
  b.has_hash = false;
  b.draft_complete = false;
  b.next_token = -1;
  b.index = -1;
  b.tokens.clear();
}

}  // namespace mtpserve
