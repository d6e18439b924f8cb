"""Python client of the mtpserve gRPC API (proto/mtpserve.proto): sync `GrpcClient` and async
`AsyncGrpcClient`, over grpcio.

    with GrpcClient("127.0.0.1:50051") as c:
        out = c.generate("Hello", max_tokens=16, temperature=0)
        print(out.text, out.usage.completion_tokens, out.spec.acceptance_rate)
        for chunk in c.generate_stream([1, 2, 3], max_tokens=16):
            print(chunk.text, end="")

The prompt is a str (tokenized by the server; chat=True renders it as one user message through
the model's chat template) or a list of token ids. Keyword parameters are the fields of the
proto's SamplingParams (temperature, top_p, top_k, min_p, seed, presence_penalty,
frequency_penalty, max_tokens, stop, stop_token_ids, ignore_eos, logprobs, skip_special_tokens,
include_stop_str_in_output); unset ones take the server's defaults (temperature 1, max_tokens:
the rest of the context). Failures raise mtpserve.client.MtpserveError whose `status` is the
grpc.StatusCode (and `code` its name), with the server's message; leaving a stream early
cancels the call, which aborts the request on the server.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import AsyncIterator, Iterator

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from mtpserve.client import DEFAULT_TIMEOUT_S, Model, MtpserveError, Usage
from mtpserve.grpc_api import mtpserve_pb2 as pb
from mtpserve.grpc_api import mtpserve_pb2_grpc as pb_grpc
from mtpserve.outputs import acceptance_rate, mean_acceptance_length

_SAMPLING_FIELDS = frozenset(f.name for f in pb.SamplingParams.DESCRIPTOR.fields)


# ---- typed results --------------------------------------------------------------------------------

@dataclass
class SpecDecodeCounters:
    """MTP speculative decoding of one request: a draft is one run of k MTP proposals."""
    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    accepted_per_position: list[int] = field(default_factory=list)  # [j]: drafts whose proposal j was accepted

    @property
    def acceptance_rate(self) -> float | None:
        return acceptance_rate(self.num_accepted_tokens, self.num_draft_tokens)

    @property
    def mean_acceptance_length(self) -> float | None:
        return mean_acceptance_length(self.num_accepted_tokens, self.num_drafts)


@dataclass
class TopLogprob:
    token_id: int
    logprob: float
    rank: int
    token: str


@dataclass
class TokenLogprob:
    token_id: int
    logprob: float
    rank: int
    token: str
    top_logprobs: list[TopLogprob] = field(default_factory=list)


@dataclass
class GenerateChunk:
    """One streamed response: what one engine step added to the request."""
    request_id: str
    text: str
    token_ids: list[int]
    finished: bool
    spec: SpecDecodeCounters  # cumulative for the request so far
    finish_reason: str | None = None  # on the last chunk
    stop_reason: int | str | None = None  # the stop token id or stop string (last chunk)
    usage: Usage | None = None  # on the last chunk
    logprobs: list[TokenLogprob] | None = None  # one per token when asked for


@dataclass
class GenerateResult:
    request_id: str
    text: str
    token_ids: list[int]
    finish_reason: str | None
    stop_reason: int | str | None
    usage: Usage | None
    spec: SpecDecodeCounters
    logprobs: list[TokenLogprob] | None = None


def _chunk(r: pb.GenerateResponse, logprobs_asked: bool) -> GenerateChunk:
    kind = r.WhichOneof("stop_reason")
    usage = None
    if r.HasField("usage"):
        u = r.usage
        usage = Usage(u.prompt_tokens, u.completion_tokens, u.total_tokens, u.cached_tokens)
    logprobs = None
    if logprobs_asked:
        logprobs = [TokenLogprob(lp.token_id, lp.logprob, lp.rank, lp.token,
                                 [TopLogprob(t.token_id, t.logprob, t.rank, t.token) for t in lp.top_logprobs])
                    for lp in r.logprobs]
    return GenerateChunk(
        r.request_id, r.text, list(r.token_ids), r.finished,
        SpecDecodeCounters(r.num_drafts, r.num_draft_tokens, r.num_accepted_tokens, list(r.accepted_per_position)),
        r.finish_reason or None, getattr(r, kind) if kind else None, usage, logprobs)


class _Accumulator:
    def __init__(self, logprobs_asked: bool):
        self.logprobs_asked = logprobs_asked
        self.text: list[str] = []
        self.token_ids: list[int] = []
        self.logprobs: list[TokenLogprob] | None = [] if logprobs_asked else None
        self.last: GenerateChunk | None = None

    def add(self, chunk: GenerateChunk) -> None:
        self.text.append(chunk.text)
        self.token_ids += chunk.token_ids
        if self.logprobs is not None and chunk.logprobs:
            self.logprobs += chunk.logprobs
        self.last = chunk

    def result(self) -> GenerateResult:
        last = self.last
        if last is None or not last.finished:
            raise MtpserveError(None, "the Generate stream ended before its last response")
        return GenerateResult(last.request_id, "".join(self.text), self.token_ids, last.finish_reason,
                              last.stop_reason, last.usage, last.spec, self.logprobs)


def _model(card: pb.ModelCard) -> Model:
    return Model(card.id, card.created, card.owned_by, card.root or None, card.max_model_len or None,
                 {"num_speculative_tokens": card.num_speculative_tokens})


def _request(prompt: str | list[int], chat: bool, model: str | None, request_id: str | None,
             sampling: dict) -> pb.GenerateRequest:
    unknown = set(sampling) - _SAMPLING_FIELDS
    if unknown:
        raise TypeError(f"unknown sampling parameter(s) {sorted(unknown)}; known: {sorted(_SAMPLING_FIELDS)}")
    sampling = {k: v for k, v in sampling.items() if v is not None}  # None: the server's default
    if isinstance(sampling.get("stop"), str):
        sampling["stop"] = [sampling["stop"]]
    try:
        request = pb.GenerateRequest(chat=chat, sampling_params=pb.SamplingParams(**sampling))
        if isinstance(prompt, str):
            request.text = prompt
        elif isinstance(prompt, (list, tuple)):
            request.token_ids.ids.extend(prompt)
        else:
            raise TypeError(f"prompt must be a str or a list of token ids, got {type(prompt).__name__}")
        if model:
            request.model = model
        if request_id is not None:
            request.request_id = request_id
    except (ValueError, TypeError) as e:  # out of range for the wire type (negative max_tokens, ...), wrong type
        raise MtpserveError(grpc.StatusCode.INVALID_ARGUMENT, f"invalid request: {e}",
                            code=grpc.StatusCode.INVALID_ARGUMENT.name) from None
    return request


class _Base:
    def __init__(self, target: str, api_key: str | None, model: str | None, timeout: float | None):
        for scheme in ("grpc://", "http://"):
            if target.startswith(scheme):
                target = target[len(scheme):]
        self.target, self.model, self.timeout = target.rstrip("/"), model, timeout
        self._metadata = (("authorization", f"Bearer {api_key}"),) if api_key else None

    def _error(self, e: grpc.RpcError) -> MtpserveError:
        code, details = e.code(), e.details() or ""
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            message = f"the call to {self.target} timed out after {self.timeout} s"
        elif code == grpc.StatusCode.UNAVAILABLE and ("failed to connect" in details or "DNS resolution" in details):
            message = f"cannot reach {self.target}: {details}"
        else:
            message = details or code.name
        return MtpserveError(code, message, type="grpc", code=code.name)

    def _generate_request(self, prompt, chat, model, request_id, sampling) -> pb.GenerateRequest:
        return _request(prompt, chat, model if model is not None else self.model, request_id, sampling)


class GrpcClient(_Base):
    """target: "host:port" of `mtpserve serve --grpc_port`; timeout: seconds per call (a whole
    Generate stream included), None for none."""

    def __init__(self, target: str = "127.0.0.1:50051", api_key: str | None = None, model: str | None = None,
                 timeout: float | None = DEFAULT_TIMEOUT_S):
        super().__init__(target, api_key, model, timeout)
        self._channel = grpc.insecure_channel(self.target)
        self._stub = pb_grpc.GenerationStub(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)

    def generate_stream(self, prompt: str | list[int], *, chat: bool = False, model: str | None = None,
                        request_id: str | None = None, **sampling) -> Iterator[GenerateChunk]:
        request = self._generate_request(prompt, chat, model, request_id, sampling)
        logprobs_asked = request.sampling_params.HasField("logprobs")
        call = self._stub.Generate(request, timeout=self.timeout, metadata=self._metadata)
        try:
            for response in call:
                yield _chunk(response, logprobs_asked)
        except grpc.RpcError as e:
            raise self._error(e) from None
        finally:
            call.cancel()  # a no-op once the call is over; else the server aborts the request

    def generate(self, prompt: str | list[int], *, chat: bool = False, model: str | None = None,
                 request_id: str | None = None, **sampling) -> GenerateResult:
        acc = _Accumulator("logprobs" in sampling and sampling["logprobs"] is not None)
        for chunk in self.generate_stream(prompt, chat=chat, model=model, request_id=request_id, **sampling):
            acc.add(chunk)
        return acc.result()

    def models(self) -> list[Model]:
        try:
            response = self._stub.Models(pb.ModelsRequest(), timeout=self.timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            raise self._error(e) from None
        return [_model(m) for m in response.models]

    def health(self, service: str = "") -> bool:
        """True when grpc.health.v1 says SERVING, False for NOT_SERVING; raises when unreachable."""
        try:
            response = self._health.Check(health_pb2.HealthCheckRequest(service=service), timeout=self.timeout)
        except grpc.RpcError as e:
            raise self._error(e) from None
        return response.status == health_pb2.HealthCheckResponse.SERVING

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "GrpcClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class AsyncGrpcClient(_Base):
    """The asyncio twin of GrpcClient (grpc.aio); the channel opens on first use, on the running loop."""

    def __init__(self, target: str = "127.0.0.1:50051", api_key: str | None = None, model: str | None = None,
                 timeout: float | None = DEFAULT_TIMEOUT_S):
        super().__init__(target, api_key, model, timeout)
        self._channel: grpc.aio.Channel | None = None

    def _stubs(self) -> tuple[pb_grpc.GenerationStub, health_pb2_grpc.HealthStub]:
        if self._channel is None:
            self._channel = grpc.aio.insecure_channel(self.target)
            self._stub = pb_grpc.GenerationStub(self._channel)
            self._health = health_pb2_grpc.HealthStub(self._channel)
        return self._stub, self._health

    async def generate_stream(self, prompt: str | list[int], *, chat: bool = False, model: str | None = None,
                              request_id: str | None = None, **sampling) -> AsyncIterator[GenerateChunk]:
        request = self._generate_request(prompt, chat, model, request_id, sampling)
        logprobs_asked = request.sampling_params.HasField("logprobs")
        call = self._stubs()[0].Generate(request, timeout=self.timeout, metadata=self._metadata)
        try:
            async for response in call:
                yield _chunk(response, logprobs_asked)
        except grpc.RpcError as e:
            raise self._error(e) from None
        finally:
            call.cancel()

    async def generate(self, prompt: str | list[int], *, chat: bool = False, model: str | None = None,
                       request_id: str | None = None, **sampling) -> GenerateResult:
        acc = _Accumulator("logprobs" in sampling and sampling["logprobs"] is not None)
        async for chunk in self.generate_stream(prompt, chat=chat, model=model, request_id=request_id, **sampling):
            acc.add(chunk)
        return acc.result()

    async def models(self) -> list[Model]:
        try:
            response = await self._stubs()[0].Models(pb.ModelsRequest(), timeout=self.timeout,
                                                      metadata=self._metadata)
        except grpc.RpcError as e:
            raise self._error(e) from None
        return [_model(m) for m in response.models]

    async def health(self, service: str = "") -> bool:
        try:
            response = await self._stubs()[1].Check(health_pb2.HealthCheckRequest(service=service),
                                                    timeout=self.timeout)
        except grpc.RpcError as e:
            raise self._error(e) from None
        return response.status == health_pb2.HealthCheckResponse.SERVING

    async def aclose(self) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = None

    async def __aenter__(self) -> "AsyncGrpcClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()
