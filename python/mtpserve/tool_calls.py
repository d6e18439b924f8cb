"""DeepSeek-V3's tool-call format: rendering tools, calls and results into a prompt, and parsing the
calls out of generated text (whole, or as it streams) into OpenAI `tool_calls`.

A DeepSeek-V3 assistant turn that calls tools reads

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
    ```json
    ARGUMENTS
    ```<｜tool▁call▁end｜>...more calls...<｜tool▁calls▁end｜>

and the results come back in one turn of <｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>RESULT<｜tool▁output▁end｜>
... <｜tool▁outputs▁end｜>. Torch-free."""
from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass

CALLS_BEGIN, CALLS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CALL_BEGIN, CALL_END, SEP = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"
OUTPUTS_BEGIN, OUTPUTS_END = "<｜tool▁outputs▁begin｜>", "<｜tool▁outputs▁end｜>"
OUTPUT_BEGIN, OUTPUT_END = "<｜tool▁output▁begin｜>", "<｜tool▁output▁end｜>"

_CALL = re.compile(re.escape(CALL_BEGIN) + r"(\w+)" + re.escape(SEP) + r"(.*?)\n```(?:json)?\n(.*?)\n```"
                   + re.escape(CALL_END), re.DOTALL)


@dataclass
class ToolCall:
    name: str
    arguments: str  # JSON text, as OpenAI returns it
    id: str = ""

    def __post_init__(self):
        self.id = self.id or f"call_{uuid.uuid4().hex[:24]}"

    def openai(self, index: int | None = None) -> dict:
        call = {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}
        return call if index is None else {"index": index, **call}


def render_call(name: str, arguments: str) -> str:
    return f"{CALL_BEGIN}function{SEP}{name}\n```json\n{arguments}\n```{CALL_END}"


def render_calls(calls: list[dict]) -> str:
    """An assistant message's OpenAI tool_calls in DeepSeek-V3's format."""
    parts = []
    for call in calls:
        function = call.get("function") or {}
        arguments = function.get("arguments", "{}")
        parts.append(render_call(function.get("name", ""),
                                 arguments if isinstance(arguments, str) else json.dumps(arguments)))
    return CALLS_BEGIN + "".join(parts) + CALLS_END


def render_output(content: str) -> str:
    return f"{OUTPUT_BEGIN}{content}{OUTPUT_END}"


def parse(text: str) -> tuple[str, list[ToolCall]]:
    """(the content before the calls, the calls); no calls: (text, [])."""
    start = text.find(CALLS_BEGIN)
    if start < 0:
        return text, []
    calls = [ToolCall(m.group(2), m.group(3)) for m in _CALL.finditer(text, start)]
    return (text[:start], calls) if calls else (text, [])


class StreamParser:
    """Splits streamed text into content deltas and whole tool calls: content passes through until
    the calls begin (text that could still become the marker is held back), then each call is
    emitted once its end marker has arrived."""

    def __init__(self):
        self._pending = ""  # content held back, or the calls' text so far
        self._in_calls = False
        self._emitted = 0

    def feed(self, text: str, final: bool = False) -> tuple[str, list[ToolCall]]:
        self._pending += text
        content = ""
        if not self._in_calls:
            start = self._pending.find(CALLS_BEGIN)
            if start >= 0:
                content, self._pending, self._in_calls = self._pending[:start], self._pending[start:], True
            else:
                keep = 0 if final else _partial_marker(self._pending, CALLS_BEGIN)
                content, self._pending = self._pending[:len(self._pending) - keep], self._pending[len(self._pending) - keep:]
                return content, []
        calls = [ToolCall(m.group(2), m.group(3)) for m in _CALL.finditer(self._pending)]
        new, self._emitted = calls[self._emitted:], len(calls)
        return content, new


def _partial_marker(text: str, marker: str) -> int:
    """Length of the longest end of `text` that begins `marker`."""
    for n in range(min(len(marker) - 1, len(text)), 0, -1):
        if text.endswith(marker[:n]):
            return n
    return 0


def describe_tools(tools: list[dict]) -> str:
    """The system prompt's part that lists the tools and the format to call them in."""
    lines = ["## Tools", "You can call these functions:"]
    for tool in tools:
        function = tool.get("function") or {}
        lines.append(f"\n### {function.get('name', '')}\n{function.get('description', '')}\n"
                     f"Parameters (JSON Schema): {json.dumps(function.get('parameters', {}))}")
    lines.append(f"\nTo call functions, answer with {CALLS_BEGIN}, then for each call "
                 f"{render_call('NAME', 'ARGUMENTS AS JSON')}, then {CALLS_END}.")
    return "\n".join(lines)


def render_conversation(messages: list[dict], tools: list[dict] | None, bos: str, eos: str,
                        add_generation_prompt: bool = True) -> str:
    """A conversation with tools, tool calls or tool results as DeepSeek-V3's template writes it."""
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    if tools:
        system = "\n\n".join(part for part in (system, describe_tools(tools)) if part)
    out, in_outputs = [bos, system], False
    for m in messages:
        if m["role"] == "tool":
            out.append((OUTPUT_BEGIN if in_outputs else OUTPUTS_BEGIN + OUTPUT_BEGIN) + m["content"] + OUTPUT_END)
            in_outputs = True
            continue
        if in_outputs:
            out.append(OUTPUTS_END)
            in_outputs = False
        if m["role"] == "user":
            out.append("<｜User｜>" + m["content"])
        elif m["role"] == "assistant":
            calls = render_calls(m["tool_calls"]) if m.get("tool_calls") else ""
            out.append("<｜Assistant｜>" + (m.get("content") or "") + calls + eos)
    if in_outputs:
        out.append(OUTPUTS_END)
    if add_generation_prompt:
        out.append("<｜Assistant｜>")
    return "".join(out)
