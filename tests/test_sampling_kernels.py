"""The CPU sampling kernels against today's per-row semantics: sampling_probs (penalties,
temperature, top-k, top-p, min-p, greedy) row for row, and sample_and_verify's exact decisions
(the same counter-based uniforms, the float64 inverse-CDF draw) and its acceptance statistics.
Statistical tests use fixed seeds and reject at p < 1e-5."""
import numpy as np
import pytest
import torch
from scipy.stats import binomtest, chisquare

from mtpserve import _C

ALPHA = 1e-5
MASK64 = (1 << 64) - 1


# ---- references: today's per-row sampler, in Python ----

def splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def uniform(seed: int, draw: int, stream: int = 0) -> float:
    """kernels/random_stream.h's uniform (streams: 0 draw, 1 accept, 2 resample)."""
    bits = splitmix64(splitmix64(seed & MASK64) ^ splitmix64((draw * 0x100000001B3 + stream) & MASK64))
    return (bits >> 11) * 2.0 ** -53


def reference_draw(p: torch.Tensor, u: float, excluded: int = -1) -> int:
    """The inverse-CDF draw: sequential float64 cumulative mass, the first index whose cdf exceeds
    u * total (searchsorted right), clamped, backed off zero-probability tokens."""
    mass = p.double().numpy().copy()
    if excluded >= 0:
        mass[excluded] = 0
    cdf = np.cumsum(mass)
    token = min(int(np.searchsorted(cdf, u * cdf[-1], side="right")), len(mass) - 1)
    while token > 0 and mass[token] == 0:
        token -= 1
    return token


def reference_verify(probs, first_row, drafts, greedy, seed, first_draw):
    """Today's verify_drafts for one sequence: (emitted tokens, accepted drafts)."""
    tokens = []
    for j, d in enumerate(drafts):
        row, n = probs[first_row + j], first_draw + j
        if greedy:
            tokens.append(int(row.argmax()))
            if tokens[-1] != d:
                return tokens, j
        elif uniform(seed, n, 1) < float(row[d]):
            tokens.append(d)
        else:
            tokens.append(reference_draw(row, uniform(seed, n, 2), d))
            return tokens, j
    last, n = probs[first_row + len(drafts)], first_draw + len(drafts)
    tokens.append(int(last.argmax()) if greedy else reference_draw(last, uniform(seed, n, 0)))
    return tokens, len(drafts)


def reference_probs(logits, columns, history):
    """Today's Sampler::probabilities + filtered_probs, one row at a time."""
    rows = []
    for i, row in enumerate(logits.float()):
        t, k, top_p, min_p, presence, frequency = (columns[name][i].item() for name in COLUMNS)
        counts = torch.bincount(torch.tensor(history[i], dtype=torch.long), minlength=row.numel()).float()
        row = row - frequency * counts - presence * (counts > 0).float()
        if t == 0:
            rows.append(torch.zeros_like(row).scatter_(0, row.argmax().view(1), 1.0))
            continue
        sorted_, order = (row / t).sort(descending=True, stable=True)
        vocab = sorted_.numel()
        if 0 < k < vocab:
            sorted_[k:] = -float("inf")
        probs = torch.softmax(sorted_, -1)
        if top_p < 1.0:
            sorted_.masked_fill_(torch.cumsum(probs, -1) - probs >= top_p, -float("inf"))
            probs = torch.softmax(sorted_, -1)
        if min_p > 0.0:
            sorted_.masked_fill_(probs < probs[0] * min_p, -float("inf"))
            probs = torch.softmax(sorted_, -1)
        rows.append(torch.zeros_like(probs).scatter_(0, order, probs))
    return torch.stack(rows)


# ---- sampling_probs ----

COLUMNS = ["temperature", "top_k", "top_p", "min_p", "presence_penalty", "frequency_penalty"]
CHOICES = dict(temperature=[0.0, 0.5, 1.0, 1.7], top_k=[0, -1, 1, 5, 40, 10**6], top_p=[1.0, 0.95, 0.6, 0.05],
               min_p=[0.0, 0.02, 0.3], presence_penalty=[0.0, 0.8, -0.5], frequency_penalty=[0.0, 0.4, 1.5])
DEFAULTS = dict(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, presence_penalty=0.0, frequency_penalty=0.0)
CASES = {
    "greedy": dict(temperature=[0.0]),
    "temperature": dict(temperature=[0.3, 1.0, 2.5]),
    "top-k": dict(top_k=[1, 3, 40, 10**6, 0, -1]),
    "top-p": dict(top_p=[0.9, 0.5, 0.05, 1.0]),
    "min-p": dict(min_p=[0.05, 0.3, 0.0]),
    "penalties": dict(temperature=[0.0, 1.0], presence_penalty=[0.0, 0.8, -0.5], frequency_penalty=[0.0, 0.4, 1.5]),
    "mixed": CHOICES,
    # Every row greedy: the step skips the sort (with penalties, so the argmax is of the penalised logits).
    "all-greedy": dict(temperature=[0.0], presence_penalty=[0.0, 0.8], frequency_penalty=[0.0, 1.5]),
}


def random_batch(rows: int, vocab: int, choices: dict, seed: int):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(rows, vocab, generator=g) * 3

    def column(name):
        options = choices.get(name, [DEFAULTS[name]])
        picks = torch.randint(len(options), (rows,), generator=g)
        dtype = torch.long if name == "top_k" else torch.float32
        return torch.tensor([options[i] for i in picks], dtype=dtype)

    columns = {name: column(name) for name in COLUMNS}
    history = [torch.randint(vocab, (int(torch.randint(0, 12, (1,), generator=g)),), generator=g).tolist()
               for _ in range(rows)]
    return logits, columns, history


def sampling_probs(logits, columns, history, device="cpu"):
    tokens = torch.tensor([t for h in history for t in h], dtype=torch.long)
    rows = torch.tensor([r for r, h in enumerate(history) for _ in h], dtype=torch.long)
    args = [logits] + [columns[name] for name in COLUMNS] + [tokens, rows]
    return _C.sampling_probs(*(a.to(device) for a in args)).cpu()


def assert_same_probs(got, want):
    # The same float32 ops in the same order, row-batched: equal up to float rounding, and the
    # kept tokens are identical (random logits put no mask boundary within rounding of a threshold).
    assert torch.equal(got > 0, want > 0)
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("case", list(CASES))
def test_sampling_probs_matches_the_per_row_sampler(case):
    logits, columns, history = random_batch(48, 1000, CASES[case], seed=len(case))
    got = sampling_probs(logits, columns, history)
    assert_same_probs(got, reference_probs(logits, columns, history))
    greedy = columns["temperature"] == 0
    assert torch.equal(got[greedy].sum(1), torch.ones(int(greedy.sum())))


def test_sampling_probs_full_batch_at_vocab_8192():
    logits, columns, history = random_batch(128, 8192, CHOICES, seed=7)
    assert_same_probs(sampling_probs(logits, columns, history), reference_probs(logits, columns, history))


def test_sampling_probs_without_penalty_tokens_and_greedy_ties():
    logits = torch.randn(3, 50)
    logits[0, [4, 9]] = 100.0  # a tie: the first index wins
    columns = {name: torch.full((3,), float(DEFAULTS[name])) for name in COLUMNS}
    columns["top_k"] = torch.zeros(3, dtype=torch.long)
    columns["temperature"][0] = 0.0
    empty = torch.zeros(0, dtype=torch.long)
    got = _C.sampling_probs(logits, *(columns[name] for name in COLUMNS), empty, empty)
    assert int(got[0].argmax()) == 4 and got[0, 4] == 1 and got[0].sum() == 1
    torch.testing.assert_close(got[1:], torch.softmax(logits[1:], -1))


def assert_rows_do_not_depend_on_their_batch(rows, vocab, device):
    # Rows without top-k, top-p or min-p skip the sort; whether the batch sorts for other rows must not
    # change their bits (nor the filtered rows' bits, whatever stages the rest of the batch leaves out).
    logits, columns, history = random_batch(rows, vocab, CHOICES, seed=11)
    batch = sampling_probs(logits, columns, history, device)
    for i in range(rows):
        one = {name: c[i : i + 1] for name, c in columns.items()}
        assert torch.equal(sampling_probs(logits[i : i + 1], one, history[i : i + 1], device)[0], batch[i]), f"row {i}"


def test_a_rows_probabilities_do_not_depend_on_what_the_rest_of_its_batch_uses():
    assert_rows_do_not_depend_on_their_batch(40, 1000, "cpu")


def test_sampling_probs_rejects_columns_of_the_wrong_length():
    logits, columns, history = random_batch(4, 30, CHOICES, seed=1)
    columns["top_p"] = columns["top_p"][:3]
    with pytest.raises(ValueError, match="top_p"):
        sampling_probs(logits, columns, history)


# ---- sample_and_verify ----

def run(probs, sequences, max_drafts=None):
    """sequences: dicts with first_row, drafts, greedy, seed (uint64), first_draw."""
    if max_drafts is None:
        max_drafts = max((len(s["drafts"]) for s in sequences), default=0)
    n = len(sequences)
    drafts = torch.zeros(n, max_drafts, dtype=torch.long)
    for i, s in enumerate(sequences):
        drafts[i, :len(s["drafts"])] = torch.tensor(s["drafts"], dtype=torch.long)
    as_int64 = [(s["seed"] & MASK64) - (1 << 64) if s["seed"] & (1 << 63) else s["seed"] for s in sequences]
    tokens, accepted = _C.sample_and_verify(
        probs, torch.tensor([s["first_row"] for s in sequences], dtype=torch.long),
        torch.tensor([len(s["drafts"]) for s in sequences], dtype=torch.long), drafts,
        torch.tensor(as_int64, dtype=torch.long), torch.tensor([s["first_draw"] for s in sequences], dtype=torch.long),
        torch.tensor([s["greedy"] for s in sequences], dtype=torch.bool), max_drafts)
    return tokens, accepted


def random_probs(rows: int, vocab: int, g: torch.Generator, zeros: float = 0.3) -> torch.Tensor:
    """Rows of random mass with a fraction of exact zeros (what top-k/top-p/min-p leave)."""
    p = torch.rand(rows, vocab, generator=g) ** 4
    p[torch.rand(rows, vocab, generator=g) < zeros] = 0
    p[:, 0] += 1e-3  # no empty row
    return (p / p.sum(1, keepdim=True)).float()


def random_sequences(probs, n, g, max_drafts=3, greedy_share=0.3):
    sequences, row = [], 0
    for _ in range(n):
        k = int(torch.randint(0, max_drafts + 1, (1,), generator=g))
        if row + k + 1 > probs.shape[0]:
            break
        # Drafts are often the row's argmax (likely accepted), sometimes any token.
        drafts = [int(probs[row + j].argmax()) if torch.rand(1, generator=g) < 0.5
                  else int(torch.randint(probs.shape[1], (1,), generator=g)) for j in range(k)]
        sequences.append(dict(first_row=row, drafts=drafts, greedy=bool(torch.rand(1, generator=g) < greedy_share),
                              seed=int(torch.randint(0, 2**62, (1,), generator=g)) * 3, first_draw=row % 17))
        row += k + 1
    return sequences


@pytest.mark.parametrize("vocab", [16, 1000, 8192])
def test_sample_and_verify_makes_todays_decisions(vocab):
    g = torch.Generator().manual_seed(vocab)
    probs = random_probs(400, vocab, g)
    sequences = random_sequences(probs, 128, g)
    tokens, accepted = run(probs, sequences)
    width = tokens.shape[1]
    for i, s in enumerate(sequences):
        want, want_accepted = reference_verify(probs, s["first_row"], s["drafts"], s["greedy"], s["seed"],
                                               s["first_draw"])
        assert accepted[i] == want_accepted
        assert tokens[i].tolist() == want + [-1] * (width - len(want))


def test_greedy_verification_accepts_the_argmax_prefix():
    probs = torch.tensor([[0.1, 0.6, 0.3], [0.5, 0.2, 0.3], [0.2, 0.2, 0.6], [0.4, 0.4, 0.2]])
    base = dict(first_row=0, greedy=True, seed=0, first_draw=0)
    cases = [([1, 0, 2], [1, 0, 2, 0], 3),  # all accepted, bonus: first index of the tied maximum
             ([1, 2, 2], [1, 0, -1, -1], 1), ([2, 0, 2], [1, -1, -1, -1], 0), ([], [1, -1, -1, -1], 0)]
    tokens, accepted = run(probs, [dict(base, drafts=d) for d, _, _ in cases], max_drafts=3)
    assert tokens.tolist() == [t for _, t, _ in cases]
    assert accepted.tolist() == [a for _, _, a in cases]


def test_seeded_sequences_draw_the_same_tokens_in_any_batch():
    g = torch.Generator().manual_seed(3)
    probs = random_probs(64, 200, g)
    sequences = random_sequences(probs, 30, g, greedy_share=0)
    tokens, accepted = run(probs, sequences)
    order = torch.randperm(len(sequences), generator=g).tolist()
    shuffled, shuffled_accepted = run(probs, [sequences[i] for i in order])
    assert torch.equal(shuffled, tokens[order]) and torch.equal(shuffled_accepted, accepted[order])
    # Another seed (and another output index) is another draw.
    moved = [dict(s, seed=s["seed"] + 1) for s in sequences]
    assert not torch.equal(run(probs, moved)[0], tokens)


def test_a_seed_above_2_63_is_taken_bit_for_bit():
    probs = torch.full((1, 1000), 1e-3)
    seed = (1 << 64) - 12345
    tokens, _ = run(probs, [dict(first_row=0, drafts=[], greedy=False, seed=seed, first_draw=5)])
    assert int(tokens[0, 0]) == reference_draw(probs[0], uniform(seed, 5))


def test_zero_probability_tokens_are_never_drawn():
    g = torch.Generator().manual_seed(5)
    probs = random_probs(4, 64, g, zeros=0.7)
    probs[:, :3] = 0  # zero mass at the front ...
    probs[:, -3:] = 0  # ... and at the back
    probs /= probs.sum(1, keepdim=True)
    draft = int(probs[0].argmax())
    sequences = [dict(first_row=i % 4, drafts=[draft] if i % 4 == 0 else [], greedy=False, seed=i, first_draw=0)
                 for i in range(4000)]
    tokens, accepted = run(probs, sequences)
    for s, row, a in zip(sequences, tokens.tolist(), accepted.tolist()):
        emitted = row[:a + 1]
        for j, t in enumerate(emitted):
            assert probs[s["first_row"] + j, t] > 0
        if s["drafts"] and a == 0:
            assert emitted[0] != draft  # the correction comes from p with the draft removed


def test_acceptance_rate_is_p_of_the_draft_and_the_residual_is_p_without_it():
    g = torch.Generator().manual_seed(11)
    probs = random_probs(2, 12, g, zeros=0.2)
    draft = int(probs[0].argsort()[-3])  # a middling draft: both paths carry many samples
    n = 20_000
    tokens, accepted = run(probs, [dict(first_row=0, drafts=[draft], greedy=False, seed=s, first_draw=7)
                                   for s in range(n)])
    p_draft = float(probs[0, draft])
    assert binomtest(int(accepted.sum()), n, p_draft).pvalue > ALPHA
    rejected = tokens[accepted == 0, 0]
    residual = probs[0].double().clone()
    residual[draft] = 0
    counts = np.bincount(rejected.numpy(), minlength=12)
    support = residual > 0
    assert counts[~support.numpy()].sum() == 0
    expected = (residual / residual.sum() * len(rejected)).numpy()
    assert chisquare(counts[support.numpy()], expected[support.numpy()]).pvalue > ALPHA
    # The bonus after an accepted draft follows the next row.
    bonus = np.bincount(tokens[accepted == 1, 1].numpy(), minlength=12)
    keep = (probs[1] > 0).numpy()
    assert chisquare(bonus[keep], (probs[1].double() / probs[1].double().sum() * bonus.sum()).numpy()[keep]).pvalue > ALPHA


def test_a_chain_of_three_drafts_accepts_with_the_product_of_their_probabilities():
    g = torch.Generator().manual_seed(13)
    probs = random_probs(4, 10, g, zeros=0.0)
    drafts = [int(probs[j].argsort()[-2 + (j % 2)]) for j in range(3)]
    n = 20_000
    _, accepted = run(probs, [dict(first_row=0, drafts=drafts, greedy=False, seed=s, first_draw=0)
                              for s in range(n)])
    p = [float(probs[j, d]) for j, d in enumerate(drafts)]
    want = [1 - p[0], p[0] * (1 - p[1]), p[0] * p[1] * (1 - p[2]), p[0] * p[1] * p[2]]
    counts = np.bincount(accepted.numpy(), minlength=4)
    assert chisquare(counts, np.array(want) * n).pvalue > ALPHA


def test_the_first_token_follows_the_target_whether_accepted_or_resampled():
    g = torch.Generator().manual_seed(17)
    probs = random_probs(2, 16, g, zeros=0.25)
    draft = int(probs[0].argmax())
    n = 20_000
    tokens, _ = run(probs, [dict(first_row=0, drafts=[draft], greedy=False, seed=s, first_draw=3) for s in range(n)])
    counts = np.bincount(tokens[:, 0].numpy(), minlength=16)
    keep = (probs[0] > 0).numpy()
    assert counts[~keep].sum() == 0
    assert chisquare(counts[keep], (probs[0].double() / probs[0].double().sum() * n).numpy()[keep]).pvalue > ALPHA


def test_an_empty_batch_and_no_drafts():
    probs = torch.rand(2, 8)
    empty = torch.zeros(0, dtype=torch.long)
    tokens, accepted = _C.sample_and_verify(probs, empty, empty, torch.zeros(0, 0, dtype=torch.long), empty, empty,
                                            torch.zeros(0, dtype=torch.bool), 0)
    assert tokens.shape == (0, 1) and accepted.shape == (0,)


@pytest.mark.parametrize("bad, match", [
    (dict(first_row=3), "exceed probs"),
    (dict(drafts=[8]), "outside the vocabulary"),
    (dict(drafts=[-1]), "outside the vocabulary"),
])
def test_sample_and_verify_rejects_out_of_range_sequences(bad, match):
    probs = torch.rand(3, 8)
    with pytest.raises(ValueError, match=match):
        run(probs, [dict(dict(first_row=0, drafts=[1], greedy=False, seed=1, first_draw=0), **bad)])


def test_sample_and_verify_rejects_misshapen_inputs():
    probs = torch.rand(3, 8)
    one = torch.zeros(1, dtype=torch.long)
    with pytest.raises(ValueError, match="drafts must be int64"):
        _C.sample_and_verify(probs, one, one, torch.zeros(1, 2, dtype=torch.long), one, one,
                             torch.zeros(1, dtype=torch.bool), 1)
    with pytest.raises(ValueError, match="greedy must be bool"):
        _C.sample_and_verify(probs, one, one, torch.zeros(1, 1, dtype=torch.long), one, one, one, 1)
