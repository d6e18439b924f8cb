// Grammars that limit which tokens a request may produce (structured output, forced tool calls).
// The engine never interprets a grammar: a request carries an opaque TokenConstraint, and the
// engine's TokenMasker turns the constraints of a step into one allowed-token mask per sampled row,
// and revises the MTP drafts the grammar forbids.
// Row j of a request that verifies drafts is the mask after its outputs and its first j drafts, so
// every verify row is held to the grammar as a plain decode at that position would be, and MTP stays
// lossless under it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace mtpserve {

// One request's grammar state; only the TokenMasker that made it knows what is inside.
class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
};

// The masks one constrained request needs this step: rows first_row .. first_row + drafts.size().
struct MaskQuery {
  const TokenConstraint* constraint;
  std::span<const int64_t> outputs;  // every output token so far (the grammar has seen a prefix of them)
  std::span<const int64_t> drafts;   // row j's mask assumes drafts[0..j) were accepted
  int64_t first_row;
};

// One constrained request's drafts for the next step, right after the MTP layer proposed them.
struct DraftRevision {
  const TokenConstraint* constraint;
  std::span<const int64_t> outputs;  // every output token so far
  std::vector<int64_t>* drafts;      // revised in place; never made longer
};

class TokenMasker {
 public:
  virtual ~TokenMasker() = default;
  // masks: [rows, words] bits, bit t % 32 of word t / 32 set when token t is allowed; every bit is
  // set on entry. Called on the engine thread, once per step that has constrained requests.
  virtual void fill(std::span<const MaskQuery> queries, int32_t* masks, int64_t rows, int64_t words) = 0;
  // The MTP layer drafts without the grammar, and a draft the grammar forbids is sure to be rejected
  // (with every draft after it). Replaces each request's drafts, from the first one the grammar
  // forbids (or where it forces another token), with the tokens it forces there, as many as fit
  // (none where it forces none). Drafts are any deterministic guess: verification stays lossless
  // whatever this returns. Called on the engine thread after drafting.
  virtual void revise_drafts(std::span<const DraftRevision> revisions) = 0;
};

}  // namespace mtpserve
