"""MTP speculative decoding: exactly lossless under greedy decoding and under sampling, the accept
paths driven on purpose, the counters, and parity with transformers' generate(use_mtp=True)."""
import random

import pytest
import torch

from mtpserve import LLM
from mtpserve.sampling_params import SamplingParams

GREEDY_64 = SamplingParams(temperature=0, max_tokens=64, ignore_eos=True)
# A 32-token budget and 8-token blocks make long prompts chunk and sequences span many blocks.
BASE = dict(dtype="float32", block_size=8, max_cache_blocks=1024, max_tokens_per_batch=32)
# Tests of the draft/verify mechanics at a known k: every step drafts k (the adaptive policy would choose).
FIXED = dict(speculative_policy="fixed")
VARIANTS = {
    "chunked+prefix": {},
    "no-chunked-prefill": dict(enable_chunked_prefill=False),
    "no-prefix-cache": dict(enable_prefix_cache=False),
    "preempting-cache": dict(max_cache_blocks=40),
}


def prompts(n, seed, low=3, high=60, shared=0):
    rng = random.Random(seed)
    prefix = [rng.randrange(4, 400) for _ in range(shared)]
    return [prefix + [rng.randrange(4, 400) for _ in range(rng.randrange(low, high))] for _ in range(n)]


BATCHES = {1: prompts(1, 20), 4: prompts(4, 21, shared=24), 32: prompts(32, 22)}


def tokens(outputs):
    return [o.outputs[0].token_ids for o in outputs]


def assert_greedy_equals_baseline(llm, baseline, variant):
    """Every batch's greedy output is `baseline`'s (no MTP), the cache ends empty, and the preempting variant
    did preempt; returns the engine's stats for the caller's own checks."""
    for n, batch in BATCHES.items():
        assert tokens(llm.generate(batch, GREEDY_64)) == baseline[n], f"batch of {n}"
    stats = llm.stats()
    assert stats.kv_usage == 0.0
    if variant == "preempting-cache":
        assert stats.preemptions > 0
    return stats


@pytest.fixture(scope="module")
def baseline(tiny_model_dir):
    llm = LLM(str(tiny_model_dir), **BASE)
    yield {n: tokens(llm.generate(batch, GREEDY_64)) for n, batch in BATCHES.items()}
    llm.shutdown()


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("k", [1, 2, 3])
def test_greedy_output_equals_output_without_mtp(tiny_model_dir, baseline, k, variant):
    llm = LLM(str(tiny_model_dir), **{**BASE, **VARIANTS[variant]}, num_speculative_tokens=k)
    try:
        for n, batch in BATCHES.items():
            assert tokens(llm.generate(batch, GREEDY_64)) == baseline[n], f"batch of {n}"
        # Again: now the prefix cache (where on) serves the shared prompts' blocks.
        assert tokens(llm.generate(BATCHES[4], GREEDY_64)) == baseline[4]
        stats = llm.stats()
        assert stats.kv_usage == 0.0
        assert stats.spec.draft_tokens > 0
        if variant != "no-prefix-cache":
            assert stats.prefix_hits > 0
        if variant == "preempting-cache":
            assert stats.preemptions > 0
    finally:
        llm.shutdown()


def test_a_repeated_prompt_is_served_as_much_of_the_prefix_cache_with_mtp_as_without(tiny_model_dir, baseline):
    """Sent again, each prompt of a batch is served every full block of its earlier run that leaves a token to
    compute, whether it drafts (k = 2) or not (k = 0): each block's last MTP row was written with the same next
    token. Output stays k = 0's."""
    served = {}
    for k in (0, 2):
        llm = LLM(str(tiny_model_dir), **BASE, **FIXED, num_speculative_tokens=k)
        try:
            llm.generate(BATCHES[4], GREEDY_64)
            before = llm.stats().prefix_hits
            assert tokens(llm.generate(BATCHES[4], GREEDY_64)) == baseline[4]
            served[k] = llm.stats().prefix_hits - before
        finally:
            llm.shutdown()
    block = BASE["block_size"]
    assert served[2] == served[0] == sum((len(p) - 1) // block * block for p in BATCHES[4])


def greedy_without_mtp(model_dir, prompt, params=GREEDY_64):
    """The reference output, and how many engine steps it took."""
    plain = LLM(str(model_dir), **BASE)
    try:
        return tokens(plain.generate([prompt], params))[0], plain.stats().steps
    finally:
        plain.shutdown()


def run_with_drafts(llm, prompt, params, future):
    """One request whose drafts are taken from `future` (its output at each index) instead of MTP."""
    engine = llm.core.engine
    engine.override_drafts("forced", future)
    engine.add_request("forced", prompt, params.to_cpp())
    out = []
    while not out or not out[-1].finished:
        out += [o for o in engine.get_outputs(1.0) if o.request_id == "forced"]
    return [t for o in out for t in o.token_ids], out[-1].spec


@pytest.mark.parametrize("k", [1, 3])
def test_known_correct_drafts_are_all_accepted(tiny_model_dir, k):
    prompt = BATCHES[1][0]
    expected, plain_steps = greedy_without_mtp(tiny_model_dir, prompt)
    llm = LLM(str(tiny_model_dir), **BASE, **FIXED, num_speculative_tokens=k)
    try:
        got, spec = run_with_drafts(llm, prompt, GREEDY_64, expected)
        assert got == expected
        assert spec.draft_tokens > 0 and spec.accepted_tokens == spec.draft_tokens
        assert spec.accepted_per_position[0] == spec.drafts
        assert sum(spec.accepted_per_position) == spec.accepted_tokens
        # Every verify step emits its k accepted drafts plus a bonus token.
        assert 1 + spec.accepted_tokens / spec.drafts > k
        assert llm.stats().steps < plain_steps
        engine_spec = llm.stats().spec
        assert (engine_spec.drafts, engine_spec.accepted_tokens) == (spec.drafts, spec.accepted_tokens)
    finally:
        llm.shutdown()


def test_known_wrong_drafts_are_all_rejected_and_output_stays_exact(tiny_model_dir):
    prompt = BATCHES[1][0]
    expected, _ = greedy_without_mtp(tiny_model_dir, prompt)
    llm = LLM(str(tiny_model_dir), **BASE, **FIXED, num_speculative_tokens=2)
    try:
        got, spec = run_with_drafts(llm, prompt, GREEDY_64, [(t + 1) % 512 for t in expected])
        assert got == expected
        assert spec.draft_tokens > 0 and spec.accepted_tokens == 0
        assert spec.accepted_per_position == [0, 0]
    finally:
        llm.shutdown()


def test_stops_inside_an_accepted_run_truncate_exactly(tiny_model_dir):
    prompt = BATCHES[1][0]
    expected, _ = greedy_without_mtp(tiny_model_dir, prompt)
    stop_at = next(i for i in range(10, 64) if expected[i] not in expected[:i])
    llm = LLM(str(tiny_model_dir), **BASE, num_speculative_tokens=3)
    try:
        by_id, _ = run_with_drafts(llm, prompt, SamplingParams(temperature=0, max_tokens=64, ignore_eos=True,
                                                               stop_token_ids=[expected[stop_at]]), expected)
        assert by_id == expected[:stop_at + 1]
        by_length, _ = run_with_drafts(llm, prompt, SamplingParams(temperature=0, max_tokens=stop_at,
                                                                   ignore_eos=True), expected)
        assert by_length == expected[:stop_at]
        assert llm.stats().kv_usage == 0.0
    finally:
        llm.shutdown()


@torch.no_grad()
def test_greedy_matches_transformers_generate_with_mtp(tiny_model_dir):
    from checkpoints import load_reference
    reference, _ = load_reference(tiny_model_dir)
    reference.config.name_or_path = str(tiny_model_dir)
    llm = LLM(str(tiny_model_dir), **BASE, num_speculative_tokens=1)
    try:
        for prompt in prompts(2, seed=30):
            expected = reference.generate(torch.tensor([prompt]), max_new_tokens=32, do_sample=False, use_mtp=True,
                                          eos_token_id=None, pad_token_id=0)[0, len(prompt):].tolist()
            params = SamplingParams(temperature=0, max_tokens=32, ignore_eos=True)
            assert tokens(llm.generate([prompt], params)) == [expected]
    finally:
        llm.shutdown()


def test_draft_model_flags_are_checked(tiny_model_dir, tmp_path):
    with pytest.raises(ValueError, match="draft_devices"):
        LLM(str(tiny_model_dir), draft_model=str(tiny_model_dir), draft_devices="npu:1", num_speculative_tokens=1)
    with pytest.raises(FileNotFoundError, match="draft_model"):
        LLM(str(tiny_model_dir), draft_model=str(tmp_path), num_speculative_tokens=1)


def test_main_checkpoint_as_draft_model_equals_builtin_mtp(tiny_model_dir):
    batch = BATCHES[4]
    results = []
    for draft in (None, str(tiny_model_dir)):
        llm = LLM(str(tiny_model_dir), **BASE, **FIXED, num_speculative_tokens=2, draft_model=draft)
        outs = llm.generate(batch, GREEDY_64)
        results.append((tokens(outs), [o.metrics.num_accepted_tokens for o in outs]))
        llm.shutdown()
    assert results[0] == results[1]


def test_context_limit_inside_an_accepted_run_truncates_exactly(tiny_model_dir):
    prompt = BATCHES[1][0]
    limit = len(prompt) + 21
    plain = LLM(str(tiny_model_dir), **BASE, max_model_len=limit)
    expected = plain.generate([prompt], GREEDY_64)[0].outputs[0]
    plain.shutdown()
    assert len(expected.token_ids) == limit - len(prompt) and expected.finish_reason == "length"
    llm = LLM(str(tiny_model_dir), **BASE, **FIXED, max_model_len=limit, num_speculative_tokens=3)
    try:
        got, spec = run_with_drafts(llm, prompt, GREEDY_64, expected.token_ids + [7] * 8)
        assert got == expected.token_ids
        assert spec.accepted_tokens == spec.draft_tokens > 0
        assert llm.stats().kv_usage == 0.0
    finally:
        llm.shutdown()


@pytest.mark.parametrize("k", [0, 2])
def test_the_argmax_shortcut_equals_the_distribution_path(tiny_model_dir, k):
    # A step of plain greedy rows takes the sampler's argmax shortcut; one penalised request in the step
    # sends every row through the distributions and sample_and_verify. Batch-invariant kernels give each
    # row the same logits either way, so the greedy requests' tokens (and accepted drafts) must match.
    llm = LLM(str(tiny_model_dir), batch_invariant=True, num_speculative_tokens=k, **BASE, **FIXED)
    greedy = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)
    penalised = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True, presence_penalty=0.5)
    batch = BATCHES[4]
    alone = llm.generate(batch, greedy)
    mixed = llm.generate(batch + prompts(1, 23), [greedy] * len(batch) + [penalised])
    llm.shutdown()
    assert tokens(alone) == tokens(mixed[:-1])
    if k:
        assert [o.metrics.num_accepted_tokens for o in alone] == [o.metrics.num_accepted_tokens for o in mixed[:-1]]
