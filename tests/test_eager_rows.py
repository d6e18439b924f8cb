"""The row counts eager forwards are padded to (KernelOps::eager_rows): none on the CPU; on a GPU one of few counts,
so that cuBLAS reuses its kernel choice for each GEMM (a new row count cost an H200 0.1-1.7 ms of host time per GEMM),
at most 1/16 more rows from 128 rows on. And the step such padding builds (StepBuilder, through _C.padded_step, with
the GPU's rule): one sequence that writes nothing, whose table of zeros covers its rows."""
import pytest
import torch

from mtpserve import _C


def test_the_cpu_pads_nothing():
    assert [_C.eager_rows("cpu", n) for n in range(0, 3000)] == list(range(0, 3000))


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU here")
def test_the_gpu_pads_to_few_row_counts_and_little_more():
    padded = [_C.eager_rows("cuda:0", n) for n in range(1, 10241)]
    for n, p in zip(range(1, 10241), padded):
        assert n <= p <= max(n + 7, n * 17 // 16), (n, p)
        assert _C.eager_rows("cuda:0", p) == p, (n, p)  # a padded count pads to itself
    assert len(set(padded)) <= 32 + 16 * 6  # multiples of 8 below 256, then 16 per octave up to 16384
    assert _C.eager_rows("cuda:0", 0) == 0


def test_an_eager_step_is_padded_by_one_sequence_that_writes_nothing():
    # A lone 5-token prompt in 8-token blocks: 8 sampled rows need 16 rows, and the padding's 11 rows attend
    # through a table of zeros as wide as they need (2 blocks), wider than the real sequence's 1.
    step = _C.padded_step(8, [(5, 1, 1)])
    assert (step["rows"], step["sampled_rows"]) == (16, 8)
    assert step["query_start"] == [0, 5, 16] and step["num_samples"] == [1, 7]
    assert step["slots"] == [8, 9, 10, 11, 12] + [-1] * 11
    assert step["context_lens"] == [5, 11] and step["table_width"] == 2
    assert step["block_tables"] == [1, 0, 0, 0]
    assert step["sampled_query_start"] == [0, 1, 8] and step["sampled_context_lens"] == [5, 11]
    assert_sampled_rows_see_what_they_see_in_the_step(step)


def assert_sampled_rows_see_what_they_see_in_the_step(step):
    """The attention of the sampled rows alone (an MTP fill's): each sequence's sampled rows, in order, each
    seeing the positions it sees among the step's rows (row j of q rows over c positions sees c - q + j + 1)."""
    starts, sampled_starts = step["query_start"], step["sampled_query_start"]
    rows = step["sample_rows"]
    for s, n in enumerate(step["num_samples"]):
        q, context = starts[s + 1] - starts[s], step["context_lens"][s]
        mine = rows[sampled_starts[s]:sampled_starts[s + 1]]
        assert len(mine) == n and all(starts[s] <= r < starts[s + 1] for r in mine)
        for j, row in enumerate(mine):
            assert step["sampled_context_lens"][s] - n + j == context - q + (row - starts[s])
    assert step["sampled_max_query_len"] == max(step["num_samples"])


@pytest.mark.parametrize("sequences", [[(300, 1, 3), (4, 4, 1), (4, 4, 1)], [(37, 0, 5)] * 9, [(1, 1, 1)] * 130,
                                       [(2000, 1, 16), (2, 2, 1)]])
def test_padding_reaches_a_row_count_that_pads_to_itself(sequences):
    block_size = 128
    step = _C.padded_step(block_size, sequences)
    real_rows, real_samples = sum(s[0] for s in sequences), sum(s[1] for s in sequences)
    starts = [sum(s[0] for s in sequences[:i]) for i in range(len(sequences) + 1)]
    assert step["query_start"][:len(sequences) + 1] == starts
    assert step["num_samples"][:len(sequences)] == [s[1] for s in sequences]
    assert real_rows <= step["rows"] <= max(real_rows + 15, real_rows * 9 // 8)
    assert real_samples <= step["sampled_rows"]
    assert all(slot == -1 for slot in step["slots"][real_rows:])
    assert all(slot >= 0 for slot in step["slots"][:real_rows])
    assert step["context_lens"][-1] <= step["table_width"] * block_size
    assert_sampled_rows_see_what_they_see_in_the_step(step)
    again = _C.padded_step(block_size, [(step["rows"], step["sampled_rows"], step["table_width"])])
    assert (again["rows"], again["sampled_rows"]) == (step["rows"], step["sampled_rows"])
