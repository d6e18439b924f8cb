"""Several choices in one request, with MTP on: a batch of prompts, n, best_of; streamed and not,
through the official `openai` client against a real server on loopback."""
from types import SimpleNamespace

import openai
import pytest

from conftest import write_tiny_model
from servers import wait_until_idle

from mtpserve.engine import EngineCore
from mtpserve.engine_args import EngineArgs
from mtpserve.server.app import build_app
from mtpserve.server.async_engine import AsyncEngine
from mtpserve.server.serve import BackgroundServer

MODEL = "tiny-dsv3"
ENGINE = dict(dtype="float32", block_size=8, max_cache_blocks=256, num_speculative_tokens=2)
PROMPTS = ["the quick brown fox", "hello there, how are you"]
CHAT = [{"role": "user", "content": "tell me a story"}]
SAMPLED = dict(temperature=1.0, max_tokens=10, extra_body={"ignore_eos": True})


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    model_dir = write_tiny_model(tmp_path_factory.mktemp("tiny_choices"), max_position_embeddings=512)
    engine = AsyncEngine(EngineCore(EngineArgs(model=str(model_dir), **ENGINE)))
    server = BackgroundServer(build_app(engine, MODEL)).start()
    with openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=60) as client:
        yield SimpleNamespace(oai=client, engine=engine)
    server.stop()
    engine.shutdown()


def one(oai, prompt, **kw):
    return oai.completions.create(model=MODEL, prompt=prompt, **kw).choices[0]


def test_batched_prompts_give_one_choice_per_prompt_and_sample(served):
    oai = served.oai
    greedy = dict(temperature=0, max_tokens=8, extra_body={"ignore_eos": True})
    alone = [one(oai, p, **greedy).text for p in PROMPTS]
    out = oai.completions.create(model=MODEL, prompt=PROMPTS, **greedy)
    assert [c.index for c in out.choices] == [0, 1] and [c.text for c in out.choices] == alone
    assert out.usage.completion_tokens == 16
    ids = [oai.completions.create(model=MODEL, prompt=p, max_tokens=1).usage.prompt_tokens for p in PROMPTS]
    assert out.usage.prompt_tokens == sum(ids)
    # Token-id prompts, n=2: prompt i's samples are choices 2i and 2i+1.
    token_ids = [[5, 6, 7, 8], [9, 10, 11]]
    out = oai.completions.create(model=MODEL, prompt=token_ids, n=2, **greedy)
    assert [c.index for c in out.choices] == [0, 1, 2, 3]
    assert [c.text for c in out.choices] == [one(oai, p, **greedy).text for p in token_ids for _ in range(2)]


def test_n_samples_are_seeded_per_index_and_reproducible(served):
    oai = served.oai
    out = oai.completions.create(model=MODEL, prompt=PROMPTS[0], n=4, seed=7, **SAMPLED)
    texts = [c.text for c in out.choices]
    assert [c.index for c in out.choices] == [0, 1, 2, 3] and len(set(texts)) > 1
    assert texts == [one(oai, PROMPTS[0], seed=7 + i, **SAMPLED).text for i in range(4)]
    again = oai.completions.create(model=MODEL, prompt=PROMPTS[0], n=4, seed=7, **SAMPLED)
    assert [c.text for c in again.choices] == texts
    streamed = {}
    for chunk in oai.completions.create(model=MODEL, prompt=PROMPTS[0], n=4, seed=7, stream=True, **SAMPLED):
        for c in chunk.choices:
            streamed[c.index] = streamed.get(c.index, "") + c.text
    assert [streamed[i] for i in range(4)] == texts


def test_chat_n_streamed_and_not(served):
    oai = served.oai
    out = oai.chat.completions.create(model=MODEL, messages=CHAT, n=3, seed=3, **SAMPLED)
    texts = [c.message.content for c in out.choices]
    assert [c.index for c in out.choices] == [0, 1, 2] and out.usage.completion_tokens == 30
    alone = oai.chat.completions.create(model=MODEL, messages=CHAT, seed=4, **SAMPLED)
    assert alone.choices[0].message.content == texts[1]
    content, roles = {}, []
    for chunk in oai.chat.completions.create(model=MODEL, messages=CHAT, n=3, seed=3, stream=True, **SAMPLED):
        for c in chunk.choices:
            content[c.index] = content.get(c.index, "") + (c.delta.content or "")
            if c.delta.role:
                roles.append(c.index)
    assert [content[i] for i in range(3)] == texts and sorted(roles) == [0, 1, 2]


def test_best_of_returns_the_samples_with_the_highest_cumulative_logprob(served):
    oai = served.oai
    candidates = [one(oai, PROMPTS[1], seed=21 + i, logprobs=0, **SAMPLED) for i in range(4)]
    ranked = sorted(candidates, key=lambda c: sum(c.logprobs.token_logprobs), reverse=True)
    out = oai.completions.create(model=MODEL, prompt=PROMPTS[1], n=2, best_of=4, seed=21, **SAMPLED)
    assert [c.text for c in out.choices] == [c.text for c in ranked[:2]]
    assert [c.index for c in out.choices] == [0, 1] and all(c.logprobs is None for c in out.choices)


def test_samples_share_the_prompt_through_the_prefix_cache(served):
    prompt = list(range(20, 60))  # five full blocks of 8
    before = served.engine.stats().prefix_hits
    served.oai.completions.create(model=MODEL, prompt=prompt, n=4, seed=1, **SAMPLED)
    # Each of the three siblings finds the most a hit can give: the full blocks short of the last
    # token (4), the last of them too, since its last MTP row was written with the same next token.
    assert served.engine.stats().prefix_hits - before == 3 * 32
    wait_until_idle(served.engine)
