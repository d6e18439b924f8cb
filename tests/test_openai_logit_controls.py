"""logit_bias, min_tokens and the presence / frequency / repetition penalties: each changes greedy
output, and MTP (k = 1..3, where they apply to every verify row) leaves it exactly as without MTP;
logit_bias forcing a token through the official `openai` client with MTP on."""
import openai
import pytest

from mtpserve import LLM
from mtpserve.engine import EngineCore
from mtpserve.engine_args import EngineArgs
from mtpserve.sampling_params import SamplingParams
from mtpserve.server.app import build_app
from mtpserve.server.async_engine import AsyncEngine
from mtpserve.server.serve import BackgroundServer

ENGINE = dict(dtype="float32", block_size=8, max_cache_blocks=256, max_tokens_per_batch=32)
PROMPTS = [[5, 17, 33, 90, 41, 7, 260, 12], [301, 44, 44, 9, 120, 66, 3, 18, 250, 77, 19]]


def greedy(**kw):
    return SamplingParams(temperature=0, max_tokens=24, **kw)


def controls(plain: list[list[int]]) -> dict[str, SamplingParams]:
    """Settings built from the plain greedy output so that each one must change it."""
    first = plain[0]
    return {
        "logit_bias": greedy(ignore_eos=True, logit_bias={first[1]: -100.0, 200: 3.0}),
        "min_tokens": greedy(stop_token_ids=[first[2]], min_tokens=12),
        "presence": greedy(ignore_eos=True, presence_penalty=1.5),
        "frequency": greedy(ignore_eos=True, frequency_penalty=1.0),
        "repetition": greedy(ignore_eos=True, repetition_penalty=1.8),
        "all": greedy(stop_token_ids=[first[3]], min_tokens=5, logit_bias={first[0]: -5.0}, presence_penalty=0.5,
                      frequency_penalty=0.5, repetition_penalty=1.3),
    }


def run(llm, params):
    return [o.outputs[0].token_ids for o in llm.generate(PROMPTS, params)]


@pytest.fixture(scope="module")
def expected(tiny_model_dir):
    llm = LLM(str(tiny_model_dir), **ENGINE)
    try:
        plain = run(llm, greedy(ignore_eos=True))
        return plain, {name: run(llm, p) for name, p in controls(plain).items()}
    finally:
        llm.shutdown()


def test_each_control_changes_greedy_output(expected):
    plain, by_control = expected
    for name, out in by_control.items():
        assert out != plain, name
    # Banned at -100: the token never appears; min_tokens holds the stop token off until then.
    assert plain[0][1] not in by_control["logit_bias"][0]
    stop = plain[0][2]
    stopped = [o for o in by_control["min_tokens"] if stop in o]
    assert all(o.index(stop) >= 11 for o in stopped)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_greedy_with_mtp_equals_greedy_without(tiny_model_dir, expected, k):
    plain, by_control = expected
    llm = LLM(str(tiny_model_dir), **ENGINE, num_speculative_tokens=k)
    try:
        for name, params in controls(plain).items():
            assert run(llm, params) == by_control[name], name
        assert llm.stats().spec.draft_tokens > 0
    finally:
        llm.shutdown()


def test_logit_bias_forces_a_token_with_mtp_through_the_openai_client(tiny_model_dir):
    engine = AsyncEngine(EngineCore(EngineArgs(model=str(tiny_model_dir), num_speculative_tokens=2, **ENGINE)))
    server = BackgroundServer(build_app(engine, "tiny")).start()
    try:
        with openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=60) as oai:
            forced = oai.completions.create(model="tiny", prompt=PROMPTS[0], max_tokens=12, temperature=0.9, seed=3,
                                            logit_bias={"123": 100}, logprobs=0, extra_body={"ignore_eos": True})
            assert forced.choices[0].logprobs.tokens == [forced.choices[0].logprobs.tokens[0]] * 12
            chat = oai.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}],
                                               max_tokens=6, logit_bias={"123": 100}, logprobs=True,
                                               extra_body={"ignore_eos": True})
            assert len({t.token for t in chat.choices[0].logprobs.content}) == 1
            with pytest.raises(openai.BadRequestError) as e:
                oai.completions.create(model="tiny", prompt="x", logit_bias={"100000": 1})
            assert e.value.body["param"] == "logit_bias"
            with pytest.raises(openai.BadRequestError):
                oai.completions.create(model="tiny", prompt="x", logit_bias={"5": 101})
        assert engine.stats().spec.draft_tokens > 0
    finally:
        server.stop()
        engine.shutdown()
