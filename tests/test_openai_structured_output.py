"""Structured output and forced tool calls through the official `openai` client, on the embedded model
with MTP off (k = 0) and on (k = 2). The model is tiny and barely trained: without a grammar its
output is not JSON, so every valid answer here is the grammar's work, verify rows included."""
import asyncio
import json

import jsonschema
import openai
import pytest

from mtpserve.engine import EngineCore
from mtpserve.engine_args import EngineArgs
from mtpserve.server.app import build_app
from mtpserve.server.async_engine import AsyncEngine
from mtpserve.server.serve import BackgroundServer

# Bounded: every string has a maxLength and every number a range, so an output always ends in time.
PERSON = {"type": "object", "additionalProperties": False, "required": ["name", "age", "member", "color"],
          "properties": {"name": {"type": "string", "maxLength": 8},
                         "age": {"type": "integer", "minimum": 0, "maximum": 120},
                         "member": {"type": "boolean"},
                         "color": {"enum": ["red", "green", "blue"]},
                         "tags": {"type": "array", "maxItems": 2, "items": {"enum": ["a", "b"]}}}}
PERSON_FORMAT = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}}
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "additionalProperties": False, "required": ["city", "unit"], "properties": {
        "city": {"type": "string", "maxLength": 12}, "unit": {"enum": ["celsius", "fahrenheit"]}}}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "The time in a zone.",
    "parameters": {"type": "object", "additionalProperties": False, "required": ["zone"],
                   "properties": {"zone": {"type": "string", "maxLength": 8}}}}}


def ask(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


@pytest.fixture(scope="module")
def servers():
    """k -> (AsyncEngine, base URL), for k = 0 and k = 2, float32 so that greedy runs compare exactly."""
    running = {}
    for k in (0, 2):
        engine = AsyncEngine(EngineCore(EngineArgs(dtype="float32", num_speculative_tokens=k)))
        running[k] = (engine, BackgroundServer(build_app(engine, "tiny")).start())
    yield {k: (engine, server.url + "/v1") for k, (engine, server) in running.items()}
    for engine, server in running.values():
        server.stop()
        engine.shutdown()


def client(url: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=url, api_key="none", max_retries=0, timeout=120)


def gather(url: str, requests: list[dict]) -> list:
    """The requests' chat completions, sent concurrently (the engine batches them)."""
    async def run():
        async with client(url) as c:
            return await asyncio.gather(*(c.chat.completions.create(model="tiny", **r) for r in requests))
    return asyncio.run(run())


@pytest.mark.parametrize("k", [0, 2])
def test_json_schema_output_validates_for_50_sampled_requests(servers, k):
    engine, url = servers[k]
    before = engine.stats().spec.accepted_tokens
    requests = [dict(messages=ask(f"Describe person number {i} as JSON."), response_format=PERSON_FORMAT,
                     temperature=1.0, seed=i, max_tokens=96) for i in range(50)]
    for answer in gather(url, requests):
        choice = answer.choices[0]
        assert choice.finish_reason == "stop", choice.message.content
        jsonschema.validate(json.loads(choice.message.content), PERSON)
    if k:
        assert engine.stats().spec.accepted_tokens > before  # drafts were verified under the grammar, and kept


def test_without_a_grammar_the_model_does_not_write_the_json(servers):
    _, url = servers[0]
    answer = gather(url, [dict(messages=ask("Describe person number 1 as JSON."), temperature=0, max_tokens=48)])[0]
    with pytest.raises(ValueError):
        jsonschema.validate(json.loads(answer.choices[0].message.content), PERSON)


def test_greedy_output_under_a_schema_is_the_same_with_mtp(servers):
    requests = [dict(messages=ask(text), response_format=PERSON_FORMAT, temperature=0, max_tokens=96)
                for text in ("Who is Ada?", "Describe a sailor.", "Give me a person.", "A JSON person, please.")]
    without, with_mtp = ([a.choices[0].message.content for a in gather(servers[k][1], requests)] for k in (0, 2))
    assert with_mtp == without
    for text in without:
        jsonschema.validate(json.loads(text), PERSON)


def test_json_object_output_parses(servers):
    _, url = servers[2]
    requests = [dict(messages=ask("Give me a JSON object."), response_format={"type": "json_object"},
                     temperature=0.7, seed=i, max_tokens=64) for i in range(8)]
    finished = [a.choices[0].message.content for a in gather(url, requests) if a.choices[0].finish_reason == "stop"]
    assert finished  # the grammar closes what it opens (a sample may still run out of tokens in a long string)
    for text in finished:
        assert isinstance(json.loads(text), dict)


def test_each_of_n_streamed_choices_follows_the_schema(servers):
    async def run():
        async with client(servers[2][1]) as c:
            texts = {}
            async for chunk in await c.chat.completions.create(
                    model="tiny", messages=ask("Three people, please."), response_format=PERSON_FORMAT, n=3,
                    temperature=1.0, seed=7, max_tokens=96, stream=True):
                for choice in chunk.choices:
                    texts[choice.index] = texts.get(choice.index, "") + (choice.delta.content or "")
            return texts

    texts = asyncio.run(run())
    assert sorted(texts) == [0, 1, 2]
    for text in texts.values():
        jsonschema.validate(json.loads(text), PERSON)


def test_completions_take_a_response_format(servers):
    async def run():
        async with client(servers[2][1]) as c:
            return await c.completions.create(model="tiny", prompt="A person:", max_tokens=96, temperature=0,
                                              extra_body={"response_format": PERSON_FORMAT})
    jsonschema.validate(json.loads(asyncio.run(run()).choices[0].text), PERSON)


@pytest.mark.parametrize("stream", [False, True])
def test_forced_tool_choice_calls_the_named_function(servers, stream):
    async def run():
        async with client(servers[2][1]) as c:
            kwargs = dict(model="tiny", messages=ask("What time is it in Paris?"), tools=[WEATHER, TIME],
                          tool_choice={"type": "function", "function": {"name": "get_weather"}}, max_tokens=96,
                          temperature=0)
            if not stream:
                choice = (await c.chat.completions.create(**kwargs)).choices[0]
                return choice.message.tool_calls, choice.finish_reason
            calls, finish = [], None
            async for chunk in await c.chat.completions.create(**kwargs, stream=True):
                calls += chunk.choices[0].delta.tool_calls or []
                finish = chunk.choices[0].finish_reason or finish
            return calls, finish

    calls, finish = asyncio.run(run())
    assert finish == "tool_calls" and len(calls) == 1
    assert calls[0].function.name == "get_weather"
    jsonschema.validate(json.loads(calls[0].function.arguments), WEATHER["function"]["parameters"])


def test_tool_choice_required_calls_one_of_the_tools(servers):
    answer = gather(servers[0][1], [dict(messages=ask("Hello!"), tools=[WEATHER, TIME], tool_choice="required",
                                         max_tokens=160, temperature=0)])[0]
    calls = answer.choices[0].message.tool_calls
    assert answer.choices[0].finish_reason == "tool_calls" and calls
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in (WEATHER, TIME)}
    for call in calls:
        jsonschema.validate(json.loads(call.function.arguments), schemas[call.function.name])


@pytest.mark.parametrize("body, param, words", [
    (dict(response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "foo"}}}),
     "response_format", "foo"),
    (dict(response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {"$ref": "#/nowhere"}}}),
     "response_format", "nowhere"),
    (dict(response_format={"type": "json_schema", "json_schema": {"name": "x"}}), "response_format", "schema"),
    (dict(response_format={"type": "xml"}), "response_format", "xml"),
    (dict(tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "get_time"}}), "tool_choice",
     "get_time"),
    (dict(tool_choice="required"), "tool_choice", "no tools"),
])
def test_bad_grammars_are_a_400_naming_the_problem(servers, body, param, words):
    with openai.OpenAI(base_url=servers[0][1], api_key="none", max_retries=0) as c:
        with pytest.raises(openai.BadRequestError) as e:
            c.chat.completions.create(model="tiny", messages=ask("hi"), max_tokens=4, **body)
    assert e.value.body["param"] == param and words in e.value.body["message"]
