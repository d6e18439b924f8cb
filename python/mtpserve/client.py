"""Python client of the mtpserve HTTP API (sync `Client` and async `AsyncClient`, over httpx).

    with Client("http://127.0.0.1:8000") as c:
        print(c.completions("Hello", max_tokens=16, temperature=0).text)
        for chunk in c.chat_stream([{"role": "user", "content": "Hi"}], max_tokens=16):
            print(chunk.content, end="")

Keyword parameters are passed through as OpenAI/vLLM request fields (max_tokens, temperature,
top_p, top_k, seed, stop, logprobs, ...); `include_usage=True` on a streaming call asks for the
final usage chunk. Failures raise MtpserveError with the server's OpenAI error message.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Iterator

import httpx

DEFAULT_TIMEOUT_S = 600.0


class MtpserveError(Exception):
    """status: the HTTP status, or None when there was none (the server could not be reached, the
    request timed out, or an error arrived inside a stream)."""

    def __init__(self, status: int | None, message: str, type: str | None = None, param: str | None = None,
                 code: str | None = None):
        super().__init__(f"[{status}] {message}" if status is not None else message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code


# ---- typed results --------------------------------------------------------------------------------

@dataclass
class Usage:
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    cached_tokens: int = 0

    @classmethod
    def parse(cls, d: dict | None) -> "Usage | None":
        if not d:
            return None
        cached = (d.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
        return cls(d["prompt_tokens"], d["completion_tokens"], d["total_tokens"], cached)


@dataclass
class CompletionChoice:
    index: int
    text: str
    finish_reason: str | None = None  # None in a stream until the last chunk
    stop_reason: int | str | None = None
    logprobs: dict | None = None  # OpenAI's {tokens, token_logprobs, top_logprobs, text_offset}


@dataclass
class Completion:
    id: str
    model: str
    created: int
    choices: list[CompletionChoice]
    usage: Usage | None = None

    @property
    def text(self) -> str:
        return self.choices[0].text if self.choices else ""


@dataclass
class CompletionChunk(Completion):
    """One streamed piece; with include_usage the last chunk has no choices and the usage."""


@dataclass
class ChatMessage:
    role: str
    content: str | None


@dataclass
class ChatChoice:
    index: int
    message: ChatMessage
    finish_reason: str | None = None
    stop_reason: int | str | None = None
    logprobs: dict | None = None  # OpenAI's {"content": [{token, logprob, bytes, top_logprobs}]}


@dataclass
class ChatCompletion:
    id: str
    model: str
    created: int
    choices: list[ChatChoice]
    usage: Usage | None = None

    @property
    def content(self) -> str:
        return (self.choices[0].message.content or "") if self.choices else ""


@dataclass
class ChatDelta:
    role: str | None = None
    content: str | None = None


@dataclass
class ChatChunkChoice:
    index: int
    delta: ChatDelta
    finish_reason: str | None = None
    stop_reason: int | str | None = None
    logprobs: dict | None = None


@dataclass
class ChatCompletionChunk:
    id: str
    model: str
    created: int
    choices: list[ChatChunkChoice]
    usage: Usage | None = None

    @property
    def content(self) -> str:
        return (self.choices[0].delta.content or "") if self.choices else ""


@dataclass
class Model:
    id: str
    created: int = 0
    owned_by: str = ""
    root: str | None = None
    max_model_len: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _completion(d: dict, cls=Completion):
    choices = [CompletionChoice(c.get("index", 0), c.get("text", ""), c.get("finish_reason"), c.get("stop_reason"),
                                c.get("logprobs")) for c in d.get("choices", [])]
    return cls(d["id"], d.get("model", ""), d.get("created", 0), choices, Usage.parse(d.get("usage")))


def _chat(d: dict) -> ChatCompletion:
    choices = [ChatChoice(c.get("index", 0), ChatMessage(c["message"].get("role", "assistant"),
                                                         c["message"].get("content")),
                          c.get("finish_reason"), c.get("stop_reason"), c.get("logprobs"))
               for c in d.get("choices", [])]
    return ChatCompletion(d["id"], d.get("model", ""), d.get("created", 0), choices, Usage.parse(d.get("usage")))


def _chat_chunk(d: dict) -> ChatCompletionChunk:
    choices = [ChatChunkChoice(c.get("index", 0), ChatDelta(c.get("delta", {}).get("role"),
                                                            c.get("delta", {}).get("content")),
                               c.get("finish_reason"), c.get("stop_reason"), c.get("logprobs"))
               for c in d.get("choices", [])]
    return ChatCompletionChunk(d["id"], d.get("model", ""), d.get("created", 0), choices,
                               Usage.parse(d.get("usage")))


def _model(d: dict) -> Model:
    known = {"id", "created", "owned_by", "root", "max_model_len"}
    return Model(d["id"], d.get("created", 0), d.get("owned_by", ""), d.get("root"), d.get("max_model_len"),
                 {k: v for k, v in d.items() if k not in known})


# ---- shared request/response handling --------------------------------------------------------------

def _error_from(response: httpx.Response) -> MtpserveError:
    try:
        error = response.json().get("error") or {}
    except (ValueError, AttributeError):
        error = {}
    message = error.get("message") or response.text or response.reason_phrase
    return MtpserveError(response.status_code, message, error.get("type"), error.get("param"), error.get("code"))


def _sse_data(line: str) -> dict | None:
    """The JSON of one `data:` line; None for other lines. Raises at an error event."""
    if not line.startswith("data:"):
        return None
    data = json.loads(line[5:].strip())
    if isinstance(data, dict) and "error" in data:
        e = data["error"] or {}
        raise MtpserveError(None, e.get("message", "error in the stream"), e.get("type"), e.get("param"),
                            e.get("code"))
    return data


def _is_done(line: str) -> bool:
    return line.startswith("data:") and line[5:].strip() == "[DONE]"


class _Base:
    def __init__(self, base_url: str, api_key: str | None, model: str | None, timeout: float | None):
        base_url = base_url.rstrip("/")
        self.base_url = base_url[:-3] if base_url.endswith("/v1") else base_url
        self.model, self.timeout = model, timeout
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def _body(self, params: dict, stream: bool, **fields) -> dict:
        body = {**fields, **params}
        if self.model is not None:
            body.setdefault("model", self.model)
        if "include_usage" in body:
            body.setdefault("stream_options", {})["include_usage"] = body.pop("include_usage")
        body["stream"] = stream
        return body

    def _transport_error(self, e: Exception) -> MtpserveError:
        if isinstance(e, httpx.TimeoutException):
            return MtpserveError(None, f"the request to {self.base_url} timed out after {self.timeout} s")
        return MtpserveError(None, f"cannot reach {self.base_url}: {type(e).__name__}: {e}")


class Client(_Base):
    def __init__(self, base_url: str = "http://127.0.0.1:8000", api_key: str | None = None, model: str | None = None,
                 timeout: float | None = DEFAULT_TIMEOUT_S):
        super().__init__(base_url, api_key, model, timeout)
        self._http = httpx.Client(base_url=self.base_url, headers=self._headers, timeout=timeout)

    def _request(self, method: str, path: str, **kwargs) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as e:
            raise self._transport_error(e) from e
        if response.status_code >= 400:
            raise _error_from(response)
        return response

    def _stream(self, path: str, body: dict) -> Iterator[dict]:
        try:
            with self._http.stream("POST", path, json=body) as response:
                if response.status_code >= 400:
                    response.read()
                    raise _error_from(response)
                for line in response.iter_lines():
                    if _is_done(line):
                        return
                    data = _sse_data(line)
                    if data is not None:
                        yield data
        except httpx.HTTPError as e:
            raise self._transport_error(e) from e
        raise MtpserveError(None, "the stream ended before [DONE]")

    def completions(self, prompt: str | list[int], **params) -> Completion:
        return _completion(self._request("POST", "/v1/completions",
                                         json=self._body(params, False, prompt=prompt)).json())

    def completions_stream(self, prompt: str | list[int], **params) -> Iterator[CompletionChunk]:
        for d in self._stream("/v1/completions", self._body(params, True, prompt=prompt)):
            yield _completion(d, CompletionChunk)

    def chat(self, messages: list[dict], **params) -> ChatCompletion:
        return _chat(self._request("POST", "/v1/chat/completions",
                                   json=self._body(params, False, messages=messages)).json())

    def chat_stream(self, messages: list[dict], **params) -> Iterator[ChatCompletionChunk]:
        for d in self._stream("/v1/chat/completions", self._body(params, True, messages=messages)):
            yield _chat_chunk(d)

    def models(self) -> list[Model]:
        return [_model(m) for m in self._request("GET", "/v1/models").json()["data"]]

    def health(self) -> bool:
        """True when the server takes requests, False when it reports itself unhealthy (503)."""
        try:
            response = self._http.get("/health")
        except httpx.HTTPError as e:
            raise self._transport_error(e) from e
        if response.status_code in (200, 503):
            return response.status_code == 200
        raise _error_from(response)

    def metrics(self) -> str:
        """The Prometheus text exposition of /metrics."""
        return self._request("GET", "/metrics").text

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class AsyncClient(_Base):
    def __init__(self, base_url: str = "http://127.0.0.1:8000", api_key: str | None = None, model: str | None = None,
                 timeout: float | None = DEFAULT_TIMEOUT_S):
        super().__init__(base_url, api_key, model, timeout)
        self._http = httpx.AsyncClient(base_url=self.base_url, headers=self._headers, timeout=timeout)

    async def _request(self, method: str, path: str, **kwargs) -> httpx.Response:
        try:
            response = await self._http.request(method, path, **kwargs)
        except httpx.HTTPError as e:
            raise self._transport_error(e) from e
        if response.status_code >= 400:
            raise _error_from(response)
        return response

    async def _stream(self, path: str, body: dict) -> AsyncIterator[dict]:
        try:
            async with self._http.stream("POST", path, json=body) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise _error_from(response)
                async for line in response.aiter_lines():
                    if _is_done(line):
                        return
                    data = _sse_data(line)
                    if data is not None:
                        yield data
        except httpx.HTTPError as e:
            raise self._transport_error(e) from e
        raise MtpserveError(None, "the stream ended before [DONE]")

    async def completions(self, prompt: str | list[int], **params) -> Completion:
        response = await self._request("POST", "/v1/completions", json=self._body(params, False, prompt=prompt))
        return _completion(response.json())

    async def completions_stream(self, prompt: str | list[int], **params) -> AsyncIterator[CompletionChunk]:
        async for d in self._stream("/v1/completions", self._body(params, True, prompt=prompt)):
            yield _completion(d, CompletionChunk)

    async def chat(self, messages: list[dict], **params) -> ChatCompletion:
        response = await self._request("POST", "/v1/chat/completions",
                                       json=self._body(params, False, messages=messages))
        return _chat(response.json())

    async def chat_stream(self, messages: list[dict], **params) -> AsyncIterator[ChatCompletionChunk]:
        async for d in self._stream("/v1/chat/completions", self._body(params, True, messages=messages)):
            yield _chat_chunk(d)

    async def models(self) -> list[Model]:
        return [_model(m) for m in (await self._request("GET", "/v1/models")).json()["data"]]

    async def health(self) -> bool:
        try:
            response = await self._http.get("/health")
        except httpx.HTTPError as e:
            raise self._transport_error(e) from e
        if response.status_code in (200, 503):
            return response.status_code == 200
        raise _error_from(response)

    async def metrics(self) -> str:
        return (await self._request("GET", "/metrics")).text

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()
