"""BlockManager: paged KV blocks with reference counts and hash-based prefix caching of full
blocks, driven through the torch-free core bindings."""
from __future__ import annotations

import pytest

from mtpserve._C import BlockManager, Sequence


def computed(bm: BlockManager, seq_id: int, tokens: list[int], complete: int | None = None,
             drafts: bool = True) -> Sequence:
    """A sequence whose tokens are all in the cache and committed, as the engine leaves it; with `complete`, its
    draft-layer rows are written for the first `complete` tokens only."""
    seq = admit(bm, seq_id, tokens, drafts)
    bm.reserve(seq, seq.num_tokens - seq.num_computed_tokens)
    seq.num_computed_tokens = seq.num_tokens
    if complete is None:
        bm.commit(seq)
    else:
        bm.commit(seq, complete)
    return seq


def admit(bm: BlockManager, seq_id: int, tokens: list[int], drafts: bool = True) -> Sequence:
    seq = Sequence(seq_id, tokens)
    seq.drafts = drafts
    bm.allocate_prompt(seq)
    return seq


def test_allocation_and_free_counts():
    bm = BlockManager(10, 4, True)
    seq = admit(bm, 0, list(range(10)))
    assert seq.num_computed_tokens == 0 and seq.block_table == []
    bm.reserve(seq, 10)
    assert len(seq.block_table) == 3 and len(set(seq.block_table)) == 3
    assert bm.num_free_blocks == 7 and bm.usage == pytest.approx(0.3)
    assert all(bm.ref_count(b) == 1 for b in seq.block_table)
    bm.reserve(seq, 12)  # already covered: a no-op
    assert len(seq.block_table) == 3
    bm.reserve(seq, 13)
    assert len(seq.block_table) == 4
    bm.free(seq)
    assert seq.block_table == [] and seq.num_computed_tokens == 0
    assert bm.num_free_blocks == 10 and bm.usage == 0.0


def test_reserve_out_of_blocks_raises_and_leaves_state():
    bm = BlockManager(2, 4, True)
    seq = admit(bm, 0, list(range(9)))
    assert not bm.can_reserve(seq, 9)
    assert bm.can_reserve(seq, 8)
    with pytest.raises(RuntimeError, match="out of KV blocks"):
        bm.reserve(seq, 9)
    assert seq.block_table == [] and bm.num_free_blocks == 2


def test_commit_registers_only_full_computed_blocks():
    bm = BlockManager(8, 4, True)
    seq = admit(bm, 0, list(range(10)))
    bm.reserve(seq, 10)
    seq.num_computed_tokens = 3
    bm.commit(seq)
    assert bm.num_cached_blocks == 0  # block 0 not fully computed yet
    seq.num_computed_tokens = 6
    bm.commit(seq)
    assert bm.num_cached_blocks == 1
    seq.num_computed_tokens = 10
    bm.commit(seq)
    assert bm.num_cached_blocks == 2  # the third block holds 2 of 4 tokens
    # Reserved speculative slots beyond the tokens are not sequence content.
    bm.reserve(seq, 4)
    seq.num_computed_tokens = 14
    bm.commit(seq)
    assert bm.num_cached_blocks == 2
    bm.commit(seq)  # idempotent
    assert bm.num_cached_blocks == 2


def test_blocks_without_draft_rows_are_served_only_to_sequences_that_never_draft():
    """With a draft layer, `complete` says which computed blocks hold the MTP rows too (the rest wait in the
    engine's stash, or never run for a retired sequence): every computed block is cached, but a drafting
    sequence is served only complete ones."""
    bm = BlockManager(16, 4, True)
    bm.set_draft_layer(True)
    a = computed(bm, 0, list(range(12)), complete=5)
    assert bm.num_cached_blocks == 3  # block 0 complete, blocks 1 and 2 computed without MTP rows
    prompt = list(range(12)) + [99]
    assert admit(bm, 1, prompt, drafts=True).block_table == a.block_table[:1]
    never_drafts = admit(bm, 2, prompt, drafts=False)
    assert never_drafts.num_computed_tokens == 12 and never_drafts.block_table == a.block_table[:3]
    bm.commit(a, 12)  # the stash caught up, but block 2's last row waits for a's next token
    drafting = admit(bm, 3, prompt, drafts=True)
    assert drafting.num_computed_tokens == 8 and drafting.block_table == a.block_table[:2]


def test_the_last_matched_block_is_served_where_its_last_draft_row_saw_the_same_next_token():
    """The MTP row at a block's last position is written with the token after the block: a drafting sequence
    whose token there differs recomputes that block; one whose token matches (a repeated prompt, or a shared
    prefix that goes on past the block) is served it, as a sequence that never drafts is."""
    bm = BlockManager(16, 4, True)
    bm.set_draft_layer(True)
    a = computed(bm, 0, list(range(9)))
    repeated = admit(bm, 1, list(range(9)), drafts=True)
    assert repeated.num_cached_tokens == 8 and repeated.block_table == a.block_table[:2]
    goes_on = admit(bm, 2, list(range(11)) + [5], drafts=True)
    assert goes_on.block_table == a.block_table[:2]
    turns_at_the_boundary = admit(bm, 3, list(range(8)) + [50, 51], drafts=True)
    assert turns_at_the_boundary.num_cached_tokens == 4 and turns_at_the_boundary.block_table == a.block_table[:1]
    assert admit(bm, 4, list(range(8)) + [50, 51], drafts=False).block_table == a.block_table[:2]


def test_a_block_with_draft_rows_takes_the_cache_place_of_one_without():
    bm = BlockManager(16, 4, True)
    bm.set_draft_layer(True)
    retired = computed(bm, 0, list(range(9)), complete=0)
    drafted = computed(bm, 1, list(range(9)), drafts=True)
    assert drafted.num_cached_tokens == 0
    assert bm.num_cached_blocks == 2
    later = admit(bm, 2, list(range(9)) + [7], drafts=True)
    assert later.block_table == drafted.block_table[:2]
    assert admit(bm, 3, list(range(9)), drafts=False).block_table == drafted.block_table[:2]
    bm.free(retired)  # uncached by the replacement: its blocks go back as fresh ones
    assert bm.num_cached_blocks == 2 and bm.num_free_blocks == 16 - 3


def test_common_prefix_is_shared_with_refcounts_and_counted():
    bm = BlockManager(16, 4, True)
    a = computed(bm, 0, list(range(10)))
    assert bm.prefix_cache_queries == 10 and bm.prefix_cache_hits == 0
    b = admit(bm, 1, list(range(8)) + [50, 51, 52])
    assert b.num_computed_tokens == 8 and b.num_cached_tokens == 8
    assert b.block_table == a.block_table[:2]
    assert [bm.ref_count(x) for x in a.block_table] == [2, 2, 1]
    assert bm.prefix_cache_queries == 21 and bm.prefix_cache_hits == 8
    bm.reserve(b, b.num_tokens - b.num_computed_tokens)
    assert b.block_table[:2] == a.block_table[:2] and b.block_table[2] not in a.block_table
    bm.free(a)
    assert [bm.ref_count(x) for x in b.block_table] == [1, 1, 1]
    bm.free(b)
    assert bm.num_free_blocks == 16


def test_prefix_hit_leaves_at_least_one_token_to_compute():
    bm = BlockManager(16, 4, True)
    computed(bm, 0, list(range(12)))
    exact_blocks = admit(bm, 1, list(range(8)))  # two full blocks, both cached
    assert exact_blocks.num_computed_tokens == 4  # the last block must still be computed
    one_more = admit(bm, 2, list(range(9)))
    assert one_more.num_computed_tokens == 8
    whole = admit(bm, 3, list(range(12)))
    assert whole.num_computed_tokens == 8 and whole.num_tokens - whole.num_computed_tokens == 4
    assert BlockManager(4, 4, True).match_prefix(Sequence(9, [1])) == 0


def test_different_tokens_at_same_position_never_share():
    bm = BlockManager(16, 4, True)
    computed(bm, 0, [1, 2, 3, 4, 5, 6, 7, 8, 9])
    assert admit(bm, 1, [1, 2, 3, 5, 5, 6, 7, 8, 9]).num_computed_tokens == 0
    # Same second block after a different first block: the chain keeps them apart.
    assert admit(bm, 2, [0, 2, 3, 4, 5, 6, 7, 8, 9]).num_computed_tokens == 0
    # Same tokens at another position (block 0 of one is block 1 of the other).
    assert admit(bm, 3, [9, 9, 9, 9, 1, 2, 3, 4, 0]).num_computed_tokens == 0


def test_forced_hash_collisions_never_share_blocks():
    bm = BlockManager(16, 4, True)
    bm.set_hash_mask_for_testing(0)  # every block hashes alike: only token checks protect
    a = computed(bm, 0, [1, 2, 3, 4, 5, 6, 7, 8, 9])
    assert bm.num_cached_blocks == 1  # the second block collided and stays private
    assert admit(bm, 1, [1, 2, 3, 5, 0]).num_computed_tokens == 0
    assert admit(bm, 2, [5, 6, 7, 8, 0]).num_computed_tokens == 0  # a's block 1, at position 0
    same = admit(bm, 3, [1, 2, 3, 4, 5, 6, 7, 8, 9])
    assert same.num_computed_tokens == 4 and same.block_table == a.block_table[:1]
    # Repeated tokens: block 1 equals block 0 in content but not in position.
    bm2 = BlockManager(16, 4, True)
    bm2.set_hash_mask_for_testing(0)
    computed(bm2, 0, [5] * 13)
    rep = admit(bm2, 1, [5] * 13)
    assert rep.num_computed_tokens == 4 and len(set(rep.block_table)) == len(rep.block_table)


def test_freed_cached_blocks_stay_reusable_until_evicted_lru():
    bm = BlockManager(4, 2, True)
    a = computed(bm, 0, [1, 2, 99])
    b = computed(bm, 1, [3, 4, 99])
    assert bm.num_free_blocks == 0
    bm.free(a)
    bm.free(b)
    assert bm.num_free_blocks == 4 and bm.num_cached_blocks == 2
    # Freed but cached: still found.
    assert bm.match_prefix(Sequence(2, [1, 2, 5])) == 2
    assert bm.match_prefix(Sequence(3, [3, 4, 5])) == 2
    # Three fresh blocks: the two never-cached ones, then the least recently freed cached one (a's).
    c = admit(bm, 4, [7, 8, 9, 10, 11])
    bm.reserve(c, 5)
    assert bm.num_cached_blocks == 1
    assert bm.match_prefix(Sequence(5, [1, 2, 5])) == 0
    assert bm.match_prefix(Sequence(6, [3, 4, 5])) == 2
    # A hit on an evictable block takes it off the eviction list.
    d = admit(bm, 7, [3, 4, 5])
    assert d.num_computed_tokens == 2 and bm.num_free_blocks == 0
    with pytest.raises(RuntimeError):
        bm.reserve(d, 1)
    bm.free(c)
    bm.free(d)
    assert bm.num_free_blocks == 4


def test_eviction_when_memory_is_needed():
    bm = BlockManager(4, 4, True)
    a = computed(bm, 0, list(range(9)))
    bm.free(a)
    assert bm.num_cached_blocks == 2 and bm.num_free_blocks == 4
    b = admit(bm, 1, list(range(100, 116)))
    bm.reserve(b, 16)
    assert bm.num_cached_blocks == 0 and bm.num_free_blocks == 0
    bm.free(b)
    assert bm.match_prefix(Sequence(2, list(range(9)))) == 0


def test_can_allocate_prompt_counts_evictable_hit_blocks_as_taken():
    bm = BlockManager(3, 2, True)
    bm.free(computed(bm, 0, [1, 2, 3, 4, 5]))
    assert bm.num_free_blocks == 3 and bm.num_cached_blocks == 2
    seq = Sequence(1, [1, 2, 3, 4, 6, 7, 8])
    assert bm.match_prefix(seq) == 4
    assert not bm.can_allocate_prompt(seq, 3)  # 2 fresh needed, 1 left once the hits are taken
    assert bm.can_allocate_prompt(seq, 2)
    assert bm.allocate_prompt(seq) == 4
    bm.reserve(seq, 2)
    assert bm.num_free_blocks == 0


def test_prefix_cache_disabled():
    bm = BlockManager(8, 4, False)
    computed(bm, 0, list(range(10)))
    seq = admit(bm, 1, list(range(10)))
    assert seq.num_computed_tokens == 0 and seq.num_cached_tokens == 0
    assert bm.num_cached_blocks == 0
    assert bm.prefix_cache_queries == 0 and bm.prefix_cache_hits == 0


def test_misuse_raises_clear_errors():
    with pytest.raises(ValueError, match="num_blocks"):
        BlockManager(0, 4, True)
    with pytest.raises(ValueError, match="block_size"):
        BlockManager(4, 0, True)
    bm = BlockManager(4, 4, True)
    seq = admit(bm, 0, [1, 2, 3])
    bm.reserve(seq, 3)
    with pytest.raises(ValueError, match="free it first"):
        bm.allocate_prompt(seq)
    with pytest.raises(IndexError):
        bm.ref_count(4)
    with pytest.raises(ValueError, match="empty"):
        Sequence(1, [])
