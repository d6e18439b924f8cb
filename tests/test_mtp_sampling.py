"""Losslessness of speculative sampling, statistically: the rejection sampler alone against the
analytic distribution, and the engine's first two sampled tokens with MTP on against MTP off.
Every test uses fixed seeds and rejects at p < 1e-5, so a correct implementation fails with
probability below 1e-4."""
import numpy as np
import pytest
import torch
from scipy.stats import chi2_contingency, chisquare

from mtpserve import _C
from mtpserve.model_loader import load_model
from checkpoints import write_checkpoint
from conftest import DEVICES

ALPHA = 1e-5
VOCAB = 16
SAMPLES = 20_000


def expected(p: torch.Tensor, total: float) -> np.ndarray:
    p = p.double().numpy()
    return p / p.sum() * total


@pytest.fixture(scope="module", params=DEVICES)
def device(request):
    return request.param


def verify(probs, drafts, greedy, seeds):
    """Every seed as one sequence of a batch verifying `drafts` against the same target rows, on the
    device of `probs`: (emitted tokens of each sequence, accepted drafts of each sequence)."""
    n, k = len(seeds), len(drafts)
    columns = [torch.zeros(n, dtype=torch.long), torch.full((n,), k), torch.tensor([drafts] * n).view(n, k),
               torch.tensor(seeds), torch.zeros(n, dtype=torch.long), torch.full((n,), greedy)]
    tokens, accepted = _C.sample_and_verify(probs, *[c.to(probs.device) for c in columns], k)
    return [row[:a + 1] for row, a in zip(tokens.tolist(), accepted.tolist())], accepted.tolist()


def test_rejection_sampler_reproduces_the_target_distribution(device):
    torch.manual_seed(0)
    probs = torch.distributions.Dirichlet(torch.ones(VOCAB)).sample((3,)).float().to(device)
    drafts = [int(probs[0].argmax()), 5]  # one likely draft, one arbitrary
    first = np.zeros(VOCAB)
    second_after_accept = np.zeros(VOCAB)
    for tokens, accepted in zip(*verify(probs, drafts, False, list(range(SAMPLES)))):
        first[tokens[0]] += 1
        if accepted >= 1:
            second_after_accept[tokens[1]] += 1
    # Token 1 follows p0 whether it came from an accepted draft or a resample; token 2, given that
    # draft 1 was accepted, follows p1.
    probs = probs.cpu()
    assert chisquare(first, expected(probs[0], first.sum())).pvalue > ALPHA
    assert chisquare(second_after_accept, expected(probs[1], second_after_accept.sum())).pvalue > ALPHA
    assert 0.05 * SAMPLES < second_after_accept.sum() < 0.95 * SAMPLES  # both paths really taken


def test_greedy_verification_is_exact_match(device):
    probs = torch.eye(VOCAB)[[3, 7, 9]].to(device)
    assert verify(probs, [3, 7], True, [0]) == ([[3, 7, 9]], [2])
    assert verify(probs, [3, 8], True, [0]) == ([[3, 7]], [1])
    assert verify(probs, [4, 7], True, [0]) == ([[3]], [0])


@pytest.fixture(scope="module")
def small_vocab_model(tmp_path_factory, device):
    path = tmp_path_factory.mktemp("vocab16")
    write_checkpoint(path, seed=21, vocab_size=VOCAB, num_hidden_layers=2, n_group=2, topk_group=1,
                     max_position_embeddings=64, initializer_range=0.3)
    return load_model(path, dtype="float32", device=device)


def first_two_tokens(model, k: int, sampling: dict, seed0: int, forced: list[int] | None = None,
                     policy: str = "fixed", k_schedule: list[int] | None = None) -> np.ndarray:
    """Joint counts [VOCAB, VOCAB] of the first two tokens of SAMPLES seeded requests."""
    config = _C.EngineConfig()
    config.block_size, config.num_blocks, config.max_model_len = 4, 4096, 64
    config.num_speculative_tokens = k
    config.speculative_policy = getattr(_C.SpeculationPolicyKind, policy)
    scheduler = _C.SchedulerConfig()
    scheduler.max_seqs_per_batch = 512
    scheduler.num_speculative_tokens = k
    config.scheduler = scheduler
    caches, mtp_caches = model.allocate_caches(config.num_blocks, config.block_size)
    engine = _C.Engine(config, model.target, caches, model.mtp_layers[0] if k else None,
                       mtp_caches[0] if k else None)
    if k_schedule:
        engine.force_k_schedule(k_schedule)
    counts = np.zeros((VOCAB, VOCAB))
    try:
        for start in range(0, SAMPLES, 2000):
            got, done = {}, 0
            for i in range(start, min(start + 2000, SAMPLES)):
                if forced:
                    engine.override_drafts(str(i), forced)
                params = _C.SamplingParams(max_tokens=3, ignore_eos=True, seed=seed0 + i, **sampling)
                engine.add_request(str(i), [2, 7, 11], params)
            while done < min(2000, SAMPLES - start):
                for out in engine.get_outputs(1.0):
                    got.setdefault(out.request_id, []).extend(out.token_ids)
                    assert not out.error
                    done += out.finished
            for tokens in got.values():
                counts[tokens[0], tokens[1]] += 1
        stats = engine.stats()
    finally:
        engine.shutdown()
    return counts, stats


def assert_same_distribution(a: np.ndarray, b: np.ndarray):
    table = np.stack([a.ravel(), b.ravel()])
    table = table[:, table.sum(0) > 0]
    assert chi2_contingency(table).pvalue > ALPHA


@pytest.mark.parametrize("sampling", [dict(temperature=1.0), dict(temperature=1.0, top_p=0.8, top_k=6)],
                         ids=["temperature-1", "top-p-top-k"])
def test_mtp_sampling_leaves_the_joint_distribution_unchanged(small_vocab_model, sampling):
    off, _ = first_two_tokens(small_vocab_model, 0, sampling, seed0=0)
    on, stats = first_two_tokens(small_vocab_model, 1, sampling, seed0=10 * SAMPLES)
    # A random MTP layer's drafts are often outside the top-p/top-k set (p = 0, always rejected).
    assert stats.spec.draft_tokens >= SAMPLES
    assert_same_distribution(off, on)
    # Drafts forced to the most common second token: the accept path carries most samples.
    likely = int(off.sum(0).argmax())
    forced, stats = first_two_tokens(small_vocab_model, 1, sampling, seed0=20 * SAMPLES, forced=[0, likely])
    assert stats.spec.accepted_tokens > 0.1 * SAMPLES
    assert_same_distribution(off, forced)


def test_mtp_sampling_under_the_adaptive_policy_leaves_the_joint_distribution_unchanged(small_vocab_model):
    """Seeded requests draft k_max under the adaptive policy (their tokens must not depend on the load), so a
    forced schedule makes the step's k alternate: some steps verify a draft and some do not."""
    sampling = dict(temperature=1.0)
    off, _ = first_two_tokens(small_vocab_model, 0, sampling, seed0=0)
    on, stats = first_two_tokens(small_vocab_model, 1, sampling, seed0=30 * SAMPLES, policy="adaptive",
                                 k_schedule=[1, 0, 0])
    assert stats.spec.draft_tokens > 0 and stats.spec.steps_by_k[0] > 0
    assert_same_distribution(off, on)
