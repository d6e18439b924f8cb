"""Streaming requests to an OpenAI-compatible server (/v1/completions, /v1/chat/completions) over aiohttp.

Every request streams with ``stream_options: {"include_usage": true}``; the record gets the arrival time of each
chunk that carries text, the generated text, and the usage the server sends in its final chunk.
"""
from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field

import aiohttp

from mtpserve.bench.metrics import RequestRecord

ENDPOINTS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
TIMEOUT = aiohttp.ClientTimeout(total=6 * 60 * 60)


def normalize_base_url(base_url: str) -> str:
    """'http://h:8000/v1/' -> 'http://h:8000' (endpoint paths are added to the server root)."""
    url = base_url.rstrip("/")
    if url.endswith("/v1"):
        url = url[:-3]
    if "://" not in url:
        url = "http://" + url
    return url


@dataclass
class RequestConfig:
    url: str  # full endpoint URL
    endpoint: str  # "completions" or "chat"
    model: str
    temperature: float = 0.0
    ignore_eos: bool = False
    extra_body: dict = field(default_factory=dict)
    headers: dict = field(default_factory=dict)


def build_payload(cfg: RequestConfig, prompt: str, max_tokens: int) -> dict:
    body: dict = {"model": cfg.model, "max_tokens": max_tokens, "temperature": cfg.temperature, "stream": True,
                  "stream_options": {"include_usage": True}}
    if cfg.endpoint == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    if cfg.ignore_eos:
        body["ignore_eos"] = True  # vLLM's extension field; sent only when asked for
    body.update(cfg.extra_body)
    return body


def _chunk_text(endpoint: str, choice: dict) -> str:
    if endpoint == "chat":
        delta = choice.get("delta") or {}
        return (delta.get("content") or "") + (delta.get("reasoning_content") or "")
    return choice.get("text") or ""


async def _sse_events(content: aiohttp.StreamReader):
    """The data payloads of a server-sent event stream; a multi-line event's data lines are joined by newlines."""
    data: list[str] = []
    async for raw in content:
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line:
            if data:
                yield "\n".join(data)
                data = []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if name == "data":
            data.append(value[1:] if value.startswith(" ") else value)
    if data:
        yield "\n".join(data)


async def send_request(session: aiohttp.ClientSession, cfg: RequestConfig, prompt: str, record: RequestRecord,
                       now=time.perf_counter) -> RequestRecord:
    """Send one streaming request and fill ``record`` (start, chunk times, text, usage, success / error)."""
    payload = build_payload(cfg, prompt, record.expected_output_len)
    text_parts: list[str] = []
    record.start = now()
    try:
        async with session.post(cfg.url, json=payload, headers=cfg.headers) as resp:
            if resp.status != 200:
                body = (await resp.text())[:1000]
                record.end = now()
                record.error = f"HTTP {resp.status}: {body}"
                return record
            done = False
            async for data in _sse_events(resp.content):
                if data.strip() == "[DONE]":
                    done = True
                    break
                t = now()
                chunk = json.loads(data)
                if chunk.get("error"):
                    record.end = now()
                    record.error = f"error in stream: {json.dumps(chunk['error'])[:1000]}"
                    return record
                for choice in chunk.get("choices") or []:
                    text = _chunk_text(cfg.endpoint, choice)
                    if text:
                        record.chunk_times.append(t)
                        text_parts.append(text)
                    if choice.get("finish_reason"):
                        record.finish_reason = choice["finish_reason"]
                        record.finish_time = t
                usage = chunk.get("usage")
                if usage:
                    if usage.get("prompt_tokens") is not None:
                        record.usage_prompt_tokens = int(usage["prompt_tokens"])
                    if usage.get("completion_tokens") is not None:
                        record.usage_completion_tokens = int(usage["completion_tokens"])
        record.end = now()
        record.generated_text = "".join(text_parts)
        if not record.chunk_times and record.finish_time is not None:
            # nothing but tokens without text (e.g. EOS first): they arrived with the finishing chunk
            record.chunk_times.append(record.finish_time)
        if not record.chunk_times:
            record.error = "never received a chunk with text or a finish reason (no TTFT)"
        elif not done:
            record.error = "the stream ended without [DONE]"
        else:
            record.success = True
    except Exception as e:  # noqa: BLE001 - any broken response fails this request only, not the run
        record.end = now()
        record.generated_text = "".join(text_parts)
        record.error = f"{type(e).__name__}: {e}"
    return record


def make_session(limit: int = 0) -> aiohttp.ClientSession:
    """One session for a whole run; ``limit`` caps open connections (0 = unlimited)."""
    return aiohttp.ClientSession(timeout=TIMEOUT, connector=aiohttp.TCPConnector(limit=limit))


async def fetch_text(session: aiohttp.ClientSession, url: str, timeout_s: float = 10.0) -> str | None:
    """GET a URL; None on any failure (connection refused, non-200)."""
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
            return await resp.text() if resp.status == 200 else None
    except (aiohttp.ClientError, OSError, asyncio.TimeoutError):
        return None


async def fetch_model_name(session: aiohttp.ClientSession, base_url: str) -> str | None:
    """The first model id listed by GET /v1/models, if the server has that route."""
    text = await fetch_text(session, base_url + "/v1/models")
    if text is None:
        return None
    try:
        data = json.loads(text).get("data") or []
        return str(data[0]["id"]) if data else None
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
