import pytest

from mtpserve.sampling_params import SamplingParams


def test_defaults_and_normalisation():
    p = SamplingParams()
    assert (p.n, p.temperature, p.top_p, p.top_k, p.min_p, p.max_tokens) == (1, 1.0, 1.0, 0, 0.0, 16)
    assert p.stop == [] and p.stop_token_ids == [] and p.logprobs is None and not p.greedy
    assert SamplingParams(stop="###").stop == ["###"]
    assert SamplingParams(stop=("a", "b"), stop_token_ids=(7,)).stop == ["a", "b"]
    assert SamplingParams(temperature=0).greedy and SamplingParams(top_k=1).greedy


def test_valid_edges_accepted():
    SamplingParams(temperature=0, top_p=1, top_k=-1, min_p=1, presence_penalty=-2, frequency_penalty=2,
                   logprobs=0, seed=-5, max_tokens=1)
    SamplingParams(top_p=1e-6, top_k=1, min_p=0, logprobs=20, seed=2**64 - 1, stop_token_ids=[0])


@pytest.mark.parametrize("kwargs, match", [
    ({"n": 2}, "n must be 1"),
    ({"temperature": -0.1}, r"temperature must be a number >= 0, got -0.1"),
    ({"temperature": float("nan")}, "temperature"),
    ({"temperature": "hot"}, "temperature"),
    ({"top_p": 0}, r"top_p must be in \(0, 1\], got 0"),
    ({"top_p": 1.01}, "top_p"),
    ({"top_k": -2}, r"top_k must be an int >= -1.*got -2"),
    ({"top_k": 2.0}, "top_k"),
    ({"top_k": True}, "top_k"),
    ({"min_p": 1.5}, r"min_p must be in \[0, 1\], got 1.5"),
    ({"min_p": -0.1}, "min_p"),
    ({"seed": 1.5}, "seed must be an int or None, got 1.5"),
    ({"seed": "42"}, "seed"),
    ({"presence_penalty": 2.5}, r"presence_penalty must be in \[-2, 2\], got 2.5"),
    ({"frequency_penalty": -3}, "frequency_penalty"),
    ({"max_tokens": 0}, "max_tokens must be an int > 0, got 0"),
    ({"max_tokens": -4}, "max_tokens"),
    ({"max_tokens": 10.0}, "max_tokens"),
    ({"max_tokens": None}, "max_tokens"),
    ({"logprobs": 21}, r"logprobs must be None or an int in 0..20, got 21"),
    ({"logprobs": -1}, "logprobs"),
    ({"stop": 5}, "unknown stop type"),
    ({"stop": [""]}, "unknown stop type"),
    ({"stop": ""}, "unknown stop type"),
    ({"stop": ["ok", None]}, "unknown stop type"),
    ({"stop": {"a": 1}}, "unknown stop type"),
    ({"stop_token_ids": [1, -1]}, "stop_token_ids must be a list of non-negative ints"),
    ({"stop_token_ids": 3}, "stop_token_ids"),
    ({"stop_token_ids": ["3"]}, "stop_token_ids"),
    # Beyond the engine's int64: a clear error, not an OverflowError from the bindings.
    ({"top_k": 2**63}, "top_k must be <= 9223372036854775807"),
    ({"stop_token_ids": [2**64]}, "stop_token_ids must be a list of non-negative ints <= 9223372036854775807"),
    ({"max_tokens": 2**63}, "max_tokens"),
])
def test_invalid_values_rejected(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SamplingParams(**kwargs)


def test_to_cpp():
    p = SamplingParams(temperature=0.7, top_p=0.9, top_k=-1, min_p=0.05, seed=-1, presence_penalty=0.5,
                       frequency_penalty=-0.5, max_tokens=33, stop_token_ids=[5, 9], ignore_eos=True,
                       logprobs=3).to_cpp()
    assert p.temperature == pytest.approx(0.7) and p.top_p == pytest.approx(0.9) and p.top_k == 0
    assert p.min_p == pytest.approx(0.05) and p.seed == 2**64 - 1
    assert p.presence_penalty == pytest.approx(0.5) and p.frequency_penalty == pytest.approx(-0.5)
    assert (p.max_tokens, list(p.stop_token_ids), p.ignore_eos, p.logprobs) == (33, [5, 9], True, 3)
    q = SamplingParams().to_cpp()
    assert q.seed is None and q.logprobs == -1 and q.top_k == 0
