"""The public gRPC API (proto/mtpserve.proto) on a grpc.aio server over an AsyncEngine.

`mtpserve serve --grpc_port N` runs it next to the HTTP API, in the same process, on the same
event loop and over the same AsyncEngine (so /metrics counts gRPC requests too). It is off by
default: the xLLM launch loop binds nothing new, and no implicit port (such as --port + 1) can
collide with --master_node_addr or another server.

Services on the port: mtpserve.v1.Generation (Generate, Models) and the standard
grpc.health.v1.Health, which answers SERVING for "" and "mtpserve.v1.Generation" while the engine
takes requests (the same health hook as the HTTP /health) and NOT_SERVING otherwise.
With --api_key, Generation calls need the metadata `authorization: Bearer <key>`; Health is open.
Server reflection (grpc.reflection.v1alpha) describes these services to grpcurl-style tools; it is
open too, as the schema it gives away is the public proto.

GrpcServer runs on the caller's event loop (start/stop are coroutines); BackgroundGrpcServer runs
one on a thread of its own (tests, notebooks)."""
from __future__ import annotations

import asyncio
import logging
import secrets
import threading
import time
import uuid
from typing import Callable

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio
from grpc_reflection.v1alpha import reflection
from jinja2 import TemplateError

from mtpserve.grpc_api import mtpserve_pb2 as pb
from mtpserve.grpc_api import mtpserve_pb2_grpc as pb_grpc
from mtpserve.outputs import Logprob
from mtpserve.sampling_params import SamplingParams
from mtpserve.server.async_engine import AsyncEngine, Draining, Overloaded, RequestRefused, StreamDelta
from mtpserve.server.tls import TlsFiles

logger = logging.getLogger("mtpserve.grpc")

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["Generation"].full_name  # "mtpserve.v1.Generation"
REFLECTED_SERVICES = (SERVICE_NAME, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
                      reflection.SERVICE_NAME)
HEALTH_POLL_S = 0.5  # how often Health.Watch subscribers see a change of health

# health() returns True, or False / (False, reason) when the server must not take requests
# (the same hook as build_app's).
HealthCheck = Callable[[], "bool | tuple[bool, str]"]


class _Malformed:
    """A request whose bytes are not a valid message: the handler answers INVALID_ARGUMENT (grpc's
    own answer would be UNKNOWN with the parser's exception text)."""

    def __init__(self, error: Exception):
        self.error = error


def _lenient(parse):
    def deserialize(data: bytes):
        try:
            return parse(data)
        except Exception as e:  # google.protobuf.message.DecodeError and friends
            return _Malformed(e)
    return deserialize


def _add_generation_service(servicer, server) -> None:
    """pb_grpc.add_GenerationServicer_to_server, with request parsers that do not raise."""
    handlers = {
        "Generate": grpc.unary_stream_rpc_method_handler(
            servicer.Generate, request_deserializer=_lenient(pb.GenerateRequest.FromString),
            response_serializer=pb.GenerateResponse.SerializeToString),
        "Models": grpc.unary_unary_rpc_method_handler(
            servicer.Models, request_deserializer=_lenient(pb.ModelsRequest.FromString),
            response_serializer=pb.ModelsResponse.SerializeToString),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME, handlers),))
    server.add_registered_method_handlers(SERVICE_NAME, handlers)


class _Refused(Exception):
    """A request the server answers with a status instead of generating."""

    def __init__(self, code: grpc.StatusCode, message: str, trailing: tuple = ()):
        super().__init__(message)
        self.code, self.message, self.trailing = code, message, trailing


def _health_of(engine: AsyncEngine, health: HealthCheck | None) -> Callable[[], tuple[bool, str]]:
    def check() -> tuple[bool, str]:
        if engine.draining:
            return False, "the server is shutting down"
        result = health() if health is not None else (engine.healthy, engine.error or "the engine is not running")
        if isinstance(result, tuple):
            return bool(result[0]), str(result[1])
        return bool(result), "the server is unhealthy"
    return check


# ---- requests and responses ---------------------------------------------------------------------

def sampling_params(msg: pb.SamplingParams, default_max_tokens: int) -> SamplingParams:
    """The engine's SamplingParams from the message; raises ValueError for values it refuses."""
    def opt(name, default):
        return getattr(msg, name) if msg.HasField(name) else default

    return SamplingParams(
        temperature=opt("temperature", 1.0), top_p=opt("top_p", 1.0), top_k=msg.top_k, min_p=msg.min_p,
        seed=opt("seed", None), presence_penalty=msg.presence_penalty, frequency_penalty=msg.frequency_penalty,
        max_tokens=opt("max_tokens", default_max_tokens), stop=list(msg.stop), stop_token_ids=list(msg.stop_token_ids),
        ignore_eos=msg.ignore_eos, logprobs=opt("logprobs", None),
        skip_special_tokens=opt("skip_special_tokens", True),
        include_stop_str_in_output=msg.include_stop_str_in_output)


def _token_logprob(token: int, entry: dict[int, Logprob], top_n: int) -> pb.TokenLogprob:
    chosen = entry.get(token) or next(iter(entry.values()))
    ranked = sorted((lp.rank, t, lp) for t, lp in entry.items() if lp.rank is not None and lp.rank <= top_n)
    return pb.TokenLogprob(
        token_id=token, logprob=chosen.logprob, rank=chosen.rank or 0, token=chosen.decoded_token or "",
        top_logprobs=[pb.TopLogprob(token_id=t, logprob=lp.logprob, rank=rank, token=lp.decoded_token or "")
                      for rank, t, lp in ranked[:top_n]])


def response(d: StreamDelta) -> pb.GenerateResponse:
    s, m = d.state, d.state.metrics
    out = pb.GenerateResponse(request_id=s.request_id, token_ids=d.token_ids, text=d.text, finished=d.finished,
                              num_drafts=m.num_drafts, num_draft_tokens=m.num_draft_tokens,
                              num_accepted_tokens=m.num_accepted_tokens,
                              accepted_per_position=m.accepted_per_position)
    if d.logprobs:
        top_n = s.params.logprobs or 0
        out.logprobs.extend(_token_logprob(t, e, top_n) for t, e in zip(d.token_ids, d.logprobs))
    if d.finished:
        out.finish_reason = s.finish_reason or ""
        if isinstance(s.stop_reason, str):
            out.stop_string = s.stop_reason
        elif s.stop_reason is not None:
            out.stop_token_id = s.stop_reason
        n_prompt, n_out = len(s.prompt_token_ids), len(s.token_ids)
        out.usage.CopyFrom(pb.Usage(prompt_tokens=n_prompt, completion_tokens=n_out, total_tokens=n_prompt + n_out,
                                    cached_tokens=m.num_cached_tokens))
    return out


# ---- services -----------------------------------------------------------------------------------

class GenerationService(pb_grpc.GenerationServicer):
    def __init__(self, engine: AsyncEngine, served_model_name: str, *, api_key: str | None = None,
                 health: HealthCheck | None = None, model_root: str | None = None):
        self.engine, self.model = engine, served_model_name
        self.check_health = _health_of(engine, health)
        self._expected_auth = f"Bearer {api_key}" if api_key else None
        args = getattr(engine.core, "args", None)
        self._card = pb.ModelCard(id=served_model_name, root=model_root or served_model_name,
                                  max_model_len=engine.max_model_len, owned_by="mtpserve", created=int(time.time()),
                                  num_speculative_tokens=getattr(args, "num_speculative_tokens", 0) or 0)

    def _authorize(self, context) -> None:
        if self._expected_auth is None:
            return
        given = dict(context.invocation_metadata() or ()).get("authorization")
        if given is None:
            raise _Refused(grpc.StatusCode.UNAUTHENTICATED,
                           "missing API key: send the metadata 'authorization: Bearer <key>'")
        if not secrets.compare_digest(str(given).encode(), self._expected_auth.encode()):
            raise _Refused(grpc.StatusCode.UNAUTHENTICATED, "incorrect API key provided")

    async def Models(self, request, context):
        try:
            self._authorize(context)
        except _Refused as e:
            await context.abort(e.code, e.message)
        if isinstance(request, _Malformed):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the request is not a valid ModelsRequest message")
        return pb.ModelsResponse(models=[self._card])

    async def _prompt(self, request) -> tuple[list[int], str | None]:
        kind = request.WhichOneof("prompt")
        tokenizer = self.engine.tokenizer
        if kind is None:
            raise _Refused(grpc.StatusCode.INVALID_ARGUMENT, "prompt: set either text or token_ids")
        if kind == "token_ids":
            if request.chat:
                raise _Refused(grpc.StatusCode.INVALID_ARGUMENT, "chat: needs a text prompt, got token_ids")
            ids = list(request.token_ids.ids)
            text = None
        elif request.chat:
            try:
                text = await self.engine.run_text_work(len(request.text), tokenizer.apply_chat_template,
                                                       [{"role": "user", "content": request.text}], True)
            except (ValueError, TemplateError) as e:
                raise _Refused(grpc.StatusCode.INVALID_ARGUMENT, f"chat: {e}") from None
            ids = await self._encode(text, add_special_tokens=False)
        else:
            text = request.text
            ids = await self._encode(text)
        if not ids:
            raise _Refused(grpc.StatusCode.INVALID_ARGUMENT, "prompt: is empty")
        return ids, text

    async def _encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        try:
            return await self.engine.encode(text, add_special_tokens)
        except RequestRefused as e:
            raise _Refused(grpc.StatusCode.INVALID_ARGUMENT, str(e)) from None

    async def _submit(self, request, context):
        self._authorize(context)
        if isinstance(request, _Malformed):
            raise _Refused(grpc.StatusCode.INVALID_ARGUMENT, "the request is not a valid GenerateRequest message")
        if request.model and request.model != self.model:
            raise _Refused(grpc.StatusCode.NOT_FOUND,
                           f"the model {request.model!r} does not exist; this server serves {self.model!r}")
        try:
            self.engine.precheck_admission()  # a burst is refused before any tokenizing
        except Overloaded as e:
            raise _Refused(grpc.StatusCode.RESOURCE_EXHAUSTED, str(e),
                           (("retry-after", str(e.retry_after_s)),)) from None
        ids, text = await self._prompt(request)
        n, limit = len(ids), self.engine.max_model_len
        if n >= limit:
            raise _Refused(grpc.StatusCode.INVALID_ARGUMENT,
                           f"this model's maximum context length is {limit} tokens, but the prompt has {n} tokens, "
                           f"which leaves no room to generate; shorten the prompt")
        try:
            params = sampling_params(request.sampling_params, default_max_tokens=self.engine.default_max_tokens(n))
        except ValueError as e:
            raise _Refused(grpc.StatusCode.INVALID_ARGUMENT, f"sampling_params: {e}") from None
        if n + params.max_tokens > limit:
            raise _Refused(grpc.StatusCode.INVALID_ARGUMENT,
                           f"this model's maximum context length is {limit} tokens, but {n + params.max_tokens} "
                           f"were requested ({n} in the prompt, {params.max_tokens} in the completion); shorten "
                           f"the prompt or lower max_tokens")
        ok, reason = self.check_health()
        if not ok:
            raise _Refused(grpc.StatusCode.UNAVAILABLE, f"the server cannot take requests: {reason}")
        given_id = request.request_id if request.HasField("request_id") else None
        if given_id == "":
            raise _Refused(grpc.StatusCode.INVALID_ARGUMENT, "request_id: must not be empty when set")
        try:
            return self.engine.add_request(ids, params, text, request_id=given_id or f"grpc-{uuid.uuid4().hex}")
        except Overloaded as e:
            raise _Refused(grpc.StatusCode.RESOURCE_EXHAUSTED, str(e),
                           (("retry-after", str(e.retry_after_s)),)) from None
        except Draining as e:
            raise _Refused(grpc.StatusCode.UNAVAILABLE, str(e)) from None
        except ValueError as e:
            code = grpc.StatusCode.ALREADY_EXISTS if given_id and "already in use" in str(e) \
                else grpc.StatusCode.INVALID_ARGUMENT
            raise _Refused(code, str(e)) from None
        except RuntimeError as e:
            raise _Refused(grpc.StatusCode.UNAVAILABLE, str(e)) from None

    async def Generate(self, request, context):
        # context.write rather than an async generator: cancellation (client gone, deadline) then
        # always lands in this frame, and the finally clause aborts the request in the engine.
        try:
            stream = await self._submit(request, context)
        except _Refused as e:
            await context.abort(e.code, e.message, trailing_metadata=e.trailing)
        failure = None
        try:
            async for d in stream:
                if d.state.error:
                    failure = d.state.error
                    break
                await context.write(response(d))
        finally:
            stream.close()
        if failure is not None and stream.timed_out:
            await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, failure)
        if failure is not None:
            ok, reason = self.check_health()
            code = grpc.StatusCode.INTERNAL if ok else grpc.StatusCode.UNAVAILABLE
            await context.abort(code, f"generation failed: {failure}")


class _HealthService(health_aio.HealthServicer):
    """grpc.health.v1.Health whose Check reads the health hook live (Watch sees changes within
    HEALTH_POLL_S through GrpcServer's poller)."""

    def __init__(self, check: Callable[[], tuple[bool, str]]):
        super().__init__()
        self._check = check
        self._status = None

    async def refresh(self) -> None:
        ok = self._check()[0]
        status = health_pb2.HealthCheckResponse.SERVING if ok else health_pb2.HealthCheckResponse.NOT_SERVING
        if status != self._status:
            self._status = status
            for service in ("", SERVICE_NAME):
                await self.set(service, status)

    async def Check(self, request, context):
        await self.refresh()
        return await super().Check(request, context)


class GrpcServer:
    """The gRPC API on `host:port` (port 0: a free port, known after start()), over TLS when tls is
    given. start() and stop() must run on the event loop that serves the requests."""

    def __init__(self, engine: AsyncEngine, served_model_name: str, *, host: str = "127.0.0.1", port: int = 0,
                 api_key: str | None = None, health: HealthCheck | None = None, model_root: str | None = None,
                 tls: TlsFiles | None = None):
        self.engine, self.host, self.port, self.tls = engine, host, port, tls
        self.generation = GenerationService(engine, served_model_name, api_key=api_key, health=health,
                                            model_root=model_root)
        self.health = _HealthService(self.generation.check_health)
        self._server: grpc.aio.Server | None = None
        self._poller: asyncio.Task | None = None

    @property
    def target(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    async def start(self) -> "GrpcServer":
        server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
        _add_generation_service(self.generation, server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        reflection.enable_server_reflection(REFLECTED_SERVICES, server)
        address = f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
        try:
            if self.tls is None:
                bound = server.add_insecure_port(address)
            else:
                bound = server.add_secure_port(address, grpc.ssl_server_credentials([(self.tls.key, self.tls.cert)]))
        except RuntimeError as e:  # grpcio raises when it cannot bind
            raise OSError(f"gRPC API: cannot listen on {address}: {e}") from None
        if bound == 0:
            raise OSError(f"gRPC API: cannot listen on {address}")
        self.port = bound
        await self.health.refresh()
        await server.start()
        self._server = server
        self._poller = asyncio.create_task(self._poll_health(), name="mtpserve-grpc-health")
        return self

    async def _poll_health(self) -> None:
        while True:
            await asyncio.sleep(HEALTH_POLL_S)
            try:
                await self.health.refresh()
            except Exception:  # a broken health hook must not end the poller
                logger.exception("the gRPC health check failed")

    async def stop(self, grace: float | None = 2.0) -> None:
        """Health turns NOT_SERVING, open calls get `grace` seconds, then are cancelled (which
        aborts their requests in the engine)."""
        if self._poller is not None:
            self._poller.cancel()
            self._poller = None
        await self.health.enter_graceful_shutdown()
        if self._server is not None:
            await self._server.stop(grace)
            self._server = None


class BackgroundGrpcServer:
    """A GrpcServer on an event loop of its own thread; the port is bound before start() returns."""

    def __init__(self, engine: AsyncEngine, served_model_name: str, **kwargs):
        self.server = GrpcServer(engine, served_model_name, **kwargs)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mtpserve-grpc", daemon=True)

    @property
    def target(self) -> str:
        return self.server.target

    def start(self, timeout_s: float = 30.0) -> "BackgroundGrpcServer":
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self._loop).result(timeout_s)
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        try:
            asyncio.run_coroutine_threadsafe(self.server.stop(grace=1.0), self._loop).result(timeout_s)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout_s)
            self._loop.close()

    def __enter__(self) -> "BackgroundGrpcServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
