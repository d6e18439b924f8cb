#pragma once
// Where the MTP fill of a sequence's positions waits while the speculation policy gives it no
// drafts. Skipping the fill at k = 0 saves an MTP forward per step; its rows are the target's
// final hidden states of those positions (the tokens after them are in the sequence already), kept
// on the device in the model runner's stash buffer. This class is the host's map of that buffer:
// sequence s owns a slot of `positions_per_slot` rows, holding its stashed positions in order
// (they are always consecutive: each step computes the positions right after the last one).
// Bounded twice: a slot's rows, and the slots (the most sequences a step runs). A sequence whose
// slot is full, or that finds no free slot, fills (catching up) instead of stashing.
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

namespace mtpserve {

struct StashedPositions {
  int64_t first_pair = 0;  // the first stashed position
  int64_t count = 0;       // positions first_pair .. first_pair + count - 1
  int64_t first_row = 0;   // their rows in the stash buffer, in the same order
};

class HiddenStash {
 public:
  HiddenStash(int64_t slots, int64_t positions_per_slot);

  int64_t rows() const { return slots_ * positions_per_slot_; }
  int64_t positions_per_slot() const { return positions_per_slot_; }

  // Stashes positions first_pair .. first_pair + count - 1 of `seq_id` after those it holds; returns
  // their first row, or nothing (stashing nothing) when they do not fit.
  std::optional<int64_t> push(int64_t seq_id, int64_t first_pair, int64_t count);
  // How many positions `seq_id` holds.
  int64_t count(int64_t seq_id) const;
  // What `seq_id` holds (count 0: nothing), removed from the stash.
  StashedPositions take(int64_t seq_id);
  // The first position whose fill has not run: positions from here on must not be shared through
  // the prefix cache yet. Nothing stashed: `computed`.
  int64_t filled_until(int64_t seq_id, int64_t computed) const;

 private:
  int64_t slots_, positions_per_slot_;
  std::vector<int64_t> free_slots_;
  std::unordered_map<int64_t, StashedPositions> held_;
};

}  // namespace mtpserve
