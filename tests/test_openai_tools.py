"""Tools in DeepSeek-V3's format: the parser (whole and streamed) on model-shaped text, the prompt a
conversation with tools, calls and results renders to, and a tool round trip through the server
(the assistant's tool_calls and the tool's result sent back, answered, streamed and not)."""
import json

import openai
import pytest

from conftest import write_tiny_model

from mtpserve import tool_calls
from mtpserve.engine import EngineCore
from mtpserve.engine_args import EngineArgs
from mtpserve.server.app import build_app
from mtpserve.server.async_engine import AsyncEngine
from mtpserve.server.serve import BackgroundServer
from mtpserve.tool_calls import CALLS_BEGIN, CALLS_END, OUTPUTS_BEGIN, OUTPUTS_END, StreamParser

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
GENERATED = ("Let me check." + CALLS_BEGIN + tool_calls.render_call("get_weather", '{"city": "Paris"}')
             + tool_calls.render_call("get_weather", '{"city": "Tokyo"}') + CALLS_END)


def test_parse_returns_the_content_and_every_call():
    content, calls = tool_calls.parse(GENERATED)
    assert content == "Let me check."
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("get_weather", {"city": "Paris"}),
                                                                 ("get_weather", {"city": "Tokyo"})]
    assert calls[0].openai(0)["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    assert tool_calls.parse("no calls here") == ("no calls here", [])
    # A cut-off call is no call: the text stays content.
    assert tool_calls.parse("x" + CALLS_BEGIN + "<｜tool▁call▁begin｜>function")[1] == []


@pytest.mark.parametrize("step", [1, 3, 17])
def test_stream_parser_gives_what_parse_gives(step):
    parser, content, calls = StreamParser(), "", []
    pieces = [GENERATED[i:i + step] for i in range(0, len(GENERATED), step)]
    for i, piece in enumerate(pieces):
        text, new = parser.feed(piece, final=i == len(pieces) - 1)
        assert CALLS_BEGIN[:2] not in text  # no part of the marker ever leaks into content
        content, calls = content + text, calls + new
    expected_content, expected_calls = tool_calls.parse(GENERATED)
    assert content == expected_content
    assert [(c.name, c.arguments) for c in calls] == [(c.name, c.arguments) for c in expected_calls]
    # Text that only looked like the marker's start is released at the end.
    plain = StreamParser()
    assert plain.feed("a <｜tool") == ("a ", []) and plain.feed("", final=True) == ("<｜tool", [])


def test_conversation_renders_tools_calls_and_results_in_order():
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "weather?"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]
    text = tool_calls.render_conversation(messages, [WEATHER], "<bos>", "<eos>")
    assert text.startswith("<bos>be brief") and "get_weather" in text.split("<｜User｜>")[0]
    after_user = text.split("<｜User｜>weather?")[1]
    assert after_user == ("<｜Assistant｜>" + tool_calls.render_calls(messages[2]["tool_calls"]) + "<eos>"
                          + OUTPUTS_BEGIN + tool_calls.render_output("sunny") + OUTPUTS_END + "<｜Assistant｜>")
    assert [c.name for c in tool_calls.parse(after_user)[1]] == ["get_weather"]


@pytest.fixture(scope="module")
def oai(tmp_path_factory):
    # A longer context: the tiny tokenizer spends a token on nearly every character of the tool list.
    model_dir = write_tiny_model(tmp_path_factory.mktemp("tiny_tools"), max_position_embeddings=2048)
    engine = AsyncEngine(EngineCore(EngineArgs(model=str(model_dir), dtype="float32", block_size=8,
                                               max_cache_blocks=512, num_speculative_tokens=2)))
    server = BackgroundServer(build_app(engine, "tiny")).start()
    with openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=60) as client:
        yield client
    server.stop()
    engine.shutdown()


def test_tool_round_trip_through_the_server(oai):
    question = [{"role": "user", "content": "what is the weather in Paris?"}]
    asked = oai.chat.completions.create(model="tiny", messages=question, tools=[WEATHER], max_tokens=4,
                                        temperature=0)
    plain = oai.chat.completions.create(model="tiny", messages=question, max_tokens=4, temperature=0)
    assert asked.usage.prompt_tokens > plain.usage.prompt_tokens  # the tools are in the prompt
    none = oai.chat.completions.create(model="tiny", messages=question, tools=[WEATHER], tool_choice="none",
                                       max_tokens=4, temperature=0)
    assert none.usage.prompt_tokens == plain.usage.prompt_tokens
    conversation = question + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C"}]
    answer = oai.chat.completions.create(model="tiny", messages=conversation, tools=[WEATHER], max_tokens=6,
                                         temperature=0, extra_body={"ignore_eos": True})
    assert answer.usage.prompt_tokens > asked.usage.prompt_tokens and answer.usage.completion_tokens == 6
    message = answer.choices[0].message
    content, calls = tool_calls.parse(message.content or "")
    assert message.tool_calls is None and not calls and answer.choices[0].finish_reason == "length"
    chunks = list(oai.chat.completions.create(model="tiny", messages=conversation, tools=[WEATHER], max_tokens=6,
                                              temperature=0, stream=True, extra_body={"ignore_eos": True}))
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == message.content
    with pytest.raises(openai.BadRequestError) as e:  # forcing a call works (test_openai_structured_output.py)
        oai.chat.completions.create(model="tiny", messages=question, tools=[WEATHER], tool_choice="sometimes")
    assert e.value.body["param"] == "tool_choice"
