"""echo + prompt logprobs on /v1/completions with MTP on: equal to transformers' log-probs (fp32,
embedded model) within 1e-4, with chunked prefill, after the prompt's blocks are in the prefix cache,
for a batch, max_tokens 0, and streamed."""
import openai
import pytest
import torch

from checkpoints import load_reference

from mtpserve.engine import EngineCore
from mtpserve.engine_args import DEFAULT_MODEL, EngineArgs
from mtpserve.server.app import build_app
from mtpserve.server.async_engine import AsyncEngine
from mtpserve.server.serve import BackgroundServer

MODEL = "tiny"
# 16-token prefill chunks: the prompts below take several.
ENGINE = dict(dtype="float32", block_size=8, max_cache_blocks=128, max_tokens_per_batch=16, num_speculative_tokens=2)
TEXT = ("The history of the city begins with a small fishing village on the river, where traders from the "
        "south met farmers from the hills to sell grain, salt and wool every autumn.")


@pytest.fixture(scope="module")
def served():
    engine = AsyncEngine(EngineCore(EngineArgs(model=str(DEFAULT_MODEL), **ENGINE)))
    server = BackgroundServer(build_app(engine, MODEL)).start()
    with openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=60) as client:
        yield client, engine
    server.stop()
    engine.shutdown()


@pytest.fixture(scope="module")
def reference():
    model, _ = load_reference(DEFAULT_MODEL)

    def logprobs(ids: list[int]) -> list[float]:
        with torch.no_grad():
            lp = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), -1)
        return [lp[i - 1, ids[i]].item() for i in range(1, len(ids))]

    return logprobs


def check_prompt_part(lp, ids, expected, top_n):
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
    assert lp.token_logprobs[1:len(ids)] == pytest.approx(expected, abs=1e-4)
    for value, top in zip(lp.token_logprobs[1:len(ids)], lp.top_logprobs[1:len(ids)]):
        assert len(top) in (top_n, top_n + 1) and max(top.values()) >= value - 1e-6


def test_echo_prompt_logprobs_equal_transformers(served, reference):
    oai, engine = served
    ids = engine.tokenizer.encode(TEXT)
    assert len(ids) > 2 * 16
    expected = reference(ids)
    out = oai.completions.create(model=MODEL, prompt=ids, echo=True, logprobs=2, max_tokens=0)
    choice = out.choices[0]
    assert len(choice.logprobs.tokens) == len(ids) and out.usage.completion_tokens == 0
    check_prompt_part(choice.logprobs, ids, expected, 2)
    assert choice.text == engine.tokenizer.decode(ids) and choice.finish_reason == "length"
    # The prompt's blocks are cached now: a request that hits them still gets its prompt logprobs.
    before = engine.stats().prefix_hits
    oai.completions.create(model=MODEL, prompt=ids, max_tokens=1)
    assert engine.stats().prefix_hits > before
    again = oai.completions.create(model=MODEL, prompt=ids, echo=True, logprobs=2, max_tokens=0)
    assert again.choices[0].logprobs.token_logprobs == choice.logprobs.token_logprobs


def test_echo_with_generation_batch_and_stream(served, reference):
    oai, engine = served
    greedy = dict(temperature=0, max_tokens=6, extra_body={"ignore_eos": True})
    plain = oai.completions.create(model=MODEL, prompt=TEXT, **greedy).choices[0]
    echoed = oai.completions.create(model=MODEL, prompt=TEXT, echo=True, logprobs=1, **greedy).choices[0]
    ids = engine.tokenizer.encode(TEXT)
    assert echoed.text == TEXT + plain.text
    assert len(echoed.logprobs.tokens) == len(ids) + 6
    check_prompt_part(echoed.logprobs, ids, reference(ids), 1)
    offsets = echoed.logprobs.text_offset
    assert offsets == sorted(offsets) and offsets[0] == 0
    batch = [ids[:20], ids[5:30]]
    out = oai.completions.create(model=MODEL, prompt=batch, echo=True, logprobs=0, max_tokens=0)
    for choice, prompt in zip(out.choices, batch):
        assert choice.logprobs.token_logprobs[1:] == pytest.approx(reference(prompt), abs=1e-4)
    chunks = list(oai.completions.create(model=MODEL, prompt=TEXT, echo=True, logprobs=1, stream=True, **greedy))
    assert "".join(c.choices[0].text for c in chunks) == echoed.text
    streamed = [v for c in chunks for v in c.choices[0].logprobs.token_logprobs]
    assert streamed[0] is None and streamed[1:] == pytest.approx(echoed.logprobs.token_logprobs[1:], abs=1e-6)
