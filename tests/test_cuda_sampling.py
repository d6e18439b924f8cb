"""The CUDA sampling kernels against the CPU ones on the same inputs: sample_and_verify token for
token (greedy and sampled sequences, drafts 0..3, thousands of seeds), sampling_probs closely.

Why exact equality holds for sample_and_verify: both kernels take the same counter-based
uniforms, the same accept tests (u < p(d) in float64) and the same draw rule; only the float64
cumulative sums of a draw are added in another order (chunks per thread, then a scan), so the
two could disagree only where u * total falls within float64 rounding (~1e-16) of a token
boundary, which with random probabilities practically never happens. We assert equality."""
import pytest
import torch

from mtpserve import _C
from test_sampling_kernels import (CHOICES, assert_rows_do_not_depend_on_their_batch, random_batch, random_probs,
                                   reference_draw, sampling_probs, uniform)

pytestmark = pytest.mark.cuda
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU here", allow_module_level=True)

DEVICE = "cuda"


def random_step(seqs: int, vocab: int, seed: int, max_drafts: int = 3, greedy_share: float = 0.3,
                zeros: float = 0.3):
    """probs and the draft columns of `seqs` sequences, each owning num_drafts + 1 rows."""
    g = torch.Generator().manual_seed(seed)
    k = torch.randint(0, max_drafts + 1, (seqs,), generator=g)
    first_row = torch.cumsum(k + 1, 0) - (k + 1)
    probs = random_probs(int((k + 1).sum()), vocab, g, zeros)
    j = torch.arange(max_drafts)
    rows = (first_row[:, None] + j[None, :]).clamp(max=probs.shape[0] - 1)
    # Half the drafts are their row's argmax (the accept path), half any token.
    likely = probs.argmax(1)[rows]
    anything = torch.randint(vocab, (seqs, max_drafts), generator=g)
    drafts = torch.where(torch.rand(seqs, max_drafts, generator=g) < 0.5, likely, anything)
    drafts = torch.where(j[None, :] < k[:, None], drafts, 0)
    seed = torch.randint(-2**62, 2**62, (seqs,), generator=g) * 2 + torch.randint(0, 2, (seqs,), generator=g)
    first_draw = torch.randint(0, 10**6, (seqs,), generator=g)
    greedy = torch.rand(seqs, generator=g) < greedy_share
    return probs, [first_row, k, drafts, seed, first_draw, greedy], max_drafts


def on_both(probs, columns, max_drafts):
    cpu = _C.sample_and_verify(probs, *columns, max_drafts)
    gpu = _C.sample_and_verify(probs.to(DEVICE), *(c.to(DEVICE) for c in columns), max_drafts)
    return cpu, tuple(t.cpu() for t in gpu)


@pytest.mark.parametrize("vocab, seqs", [(16, 4096), (1000, 4096), (8192, 2048), (129280, 192)])
def test_sample_and_verify_equals_the_cpu_kernel(vocab, seqs):
    probs, columns, max_drafts = random_step(seqs, vocab, seed=vocab)
    (tokens, accepted), (gpu_tokens, gpu_accepted) = on_both(probs, columns, max_drafts)
    assert torch.equal(gpu_accepted, accepted)
    assert torch.equal(gpu_tokens, tokens)
    assert 0 < int(accepted.sum()) < int(columns[1].sum())  # accept and reject paths both taken


@pytest.mark.parametrize("greedy_share", [0.0, 1.0])
def test_all_sampled_and_all_greedy_batches_equal_the_cpu_kernel(greedy_share):
    (tokens, accepted), (gpu_tokens, gpu_accepted) = on_both(*random_step(3000, 512, seed=7, greedy_share=greedy_share))
    assert torch.equal(gpu_accepted, accepted) and torch.equal(gpu_tokens, tokens)


def test_sparse_rows_draw_what_the_cpu_draws():
    # Few nonzero tokens in a large vocabulary: most threads' chunks are empty, the owner search
    # and the last-nonzero fallback are exercised.
    probs, columns, max_drafts = random_step(256, 129280, seed=3, zeros=0.99995, greedy_share=0.0)
    (tokens, accepted), (gpu_tokens, gpu_accepted) = on_both(probs, columns, max_drafts)
    assert torch.equal(gpu_accepted, accepted) and torch.equal(gpu_tokens, tokens)
    for row, a, first in zip(gpu_tokens.tolist(), gpu_accepted.tolist(), columns[0].tolist()):
        assert all(probs[first + j, t] > 0 for j, t in enumerate(row[:a + 1]))


def test_no_drafts_at_all():
    probs, columns, _ = random_step(2000, 3000, seed=5, max_drafts=0)
    (tokens, accepted), (gpu_tokens, gpu_accepted) = on_both(probs, columns, 0)
    assert gpu_tokens.shape == (2000, 1) and torch.equal(gpu_tokens, tokens) and torch.equal(gpu_accepted, accepted)


def test_the_kernel_guards_what_the_host_cannot_check():
    # The CPU kernel raises on these; the GPU cannot without a synchronisation, so it stays in
    # bounds: rows outside probs emit -1, a draft outside the vocabulary is rejected.
    probs = random_probs(3, 100, torch.Generator().manual_seed(1), zeros=0.0)
    first_row, k = torch.tensor([2, 0]), torch.tensor([1, 1])
    drafts, seed = torch.tensor([[5], [100]]), torch.tensor([9, 9])
    first_draw, greedy = torch.tensor([4, 4]), torch.tensor([False, False])
    tokens, accepted = _C.sample_and_verify(*(t.to(DEVICE) for t in (probs, first_row, k, drafts, seed, first_draw,
                                                                     greedy)), 1)
    assert tokens.tolist()[0] == [-1, -1] and accepted.tolist() == [0, 0]
    assert tokens.tolist()[1] == [reference_draw(probs[0], uniform(9, 4, 2)), -1]


def test_sampling_probs_is_close_to_the_cpu_kernel():
    logits, columns, history = random_batch(256, 8192, CHOICES, seed=11)
    cpu, gpu = sampling_probs(logits, columns, history), sampling_probs(logits, columns, history, DEVICE)
    greedy = columns["temperature"] == 0
    assert torch.equal(gpu[greedy], cpu[greedy])  # one-hot on the same argmax
    # exp, sum and cumsum round differently on the GPU: values agree to float rounding, and a
    # top-p / min-p boundary can flip only where a sum lands within rounding of the threshold,
    # which a handful of random rows out of 256 might; those rows are left out, at most 2.
    same_support = ((gpu > 0) == (cpu > 0)).all(1)
    assert int((~same_support).sum()) <= 2
    torch.testing.assert_close(gpu[same_support], cpu[same_support], atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("vocab", [8192, 129280])
def test_a_rows_gpu_probabilities_do_not_depend_on_what_the_rest_of_its_batch_uses(vocab):
    assert_rows_do_not_depend_on_their_batch(24, vocab, DEVICE)


def test_gpu_probs_sample_what_the_cpu_samples_from_them():
    logits, columns, _ = random_batch(512, 8192, CHOICES, seed=12)
    probs = sampling_probs(logits, columns, [[]] * 512, DEVICE)  # no penalty tokens
    seqs = torch.arange(512)
    columns_sv = [seqs, torch.zeros(512, dtype=torch.long), torch.zeros(512, 0, dtype=torch.long), seqs * 7919,
                  seqs, columns["temperature"] == 0]
    (tokens, accepted), (gpu_tokens, gpu_accepted) = on_both(probs, columns_sv, 0)
    assert torch.equal(gpu_tokens, tokens) and torch.equal(gpu_accepted, accepted)
