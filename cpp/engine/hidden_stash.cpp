#include "engine/hidden_stash.h"

#include <stdexcept>
#include <string>

namespace mtpserve {

HiddenStash::HiddenStash(int64_t slots, int64_t positions_per_slot)
    : slots_(slots), positions_per_slot_(positions_per_slot) {
  if (slots < 1 || positions_per_slot < 1) {
    throw std::invalid_argument("HiddenStash needs at least one slot of at least one position");
  }
  for (int64_t s = slots - 1; s >= 0; --s) free_slots_.push_back(s);
}

std::optional<int64_t> HiddenStash::push(int64_t seq_id, int64_t first_pair, int64_t count) {
  auto it = held_.find(seq_id);
  if (it == held_.end()) {
    if (free_slots_.empty() || count > positions_per_slot_) return std::nullopt;
    const int64_t slot = free_slots_.back();
    free_slots_.pop_back();
    it = held_.emplace(seq_id, StashedPositions{first_pair, 0, slot * positions_per_slot_}).first;
  }
  StashedPositions& held = it->second;
  if (held.first_pair + held.count != first_pair) {
    throw std::logic_error("HiddenStash: sequence " + std::to_string(seq_id) + " stashes position " +
                           std::to_string(first_pair) + " after " + std::to_string(held.first_pair + held.count));
  }
  if (held.count + count > positions_per_slot_) return std::nullopt;
  const int64_t row = held.first_row + held.count;
  held.count += count;
  return row;
}

int64_t HiddenStash::count(int64_t seq_id) const {
  auto it = held_.find(seq_id);
  return it == held_.end() ? 0 : it->second.count;
}

StashedPositions HiddenStash::take(int64_t seq_id) {
  auto it = held_.find(seq_id);
  if (it == held_.end()) return {};
  const StashedPositions held = it->second;
  free_slots_.push_back(held.first_row / positions_per_slot_);
  held_.erase(it);
  return held;
}

int64_t HiddenStash::filled_until(int64_t seq_id, int64_t computed) const {
  auto it = held_.find(seq_id);
  return it == held_.end() ? computed : it->second.first_pair;
}

}  // namespace mtpserve
