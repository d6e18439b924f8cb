"""The OpenAI-compatible HTTP API over an AsyncEngine: /v1/models, /v1/completions,
/v1/chat/completions (JSON or server-sent events), /health, /metrics, /openapi.json and /docs."""
from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from typing import Callable

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from jinja2 import TemplateError
from prometheus_client import CONTENT_TYPE_LATEST

from mtpserve import __version__
from mtpserve import tool_calls
from mtpserve.sampling_params import SamplingParams
from mtpserve.server.admission import AdmissionMiddleware
from mtpserve.server.async_engine import AsyncEngine, Draining, Overloaded, RequestRefused, RequestStream
from mtpserve.server.auth import ApiKeyMiddleware, BodySizeLimitMiddleware
from mtpserve.server.choices import Prompt, Sample, Samples
from mtpserve.server.errors import (APIError, HealthErrorResponse, documented_errors, error_body,
                                    install_error_handlers)
from mtpserve.server.metrics import ServerMetrics
from mtpserve.server.protocol import (ChatCompletionRequest, CompletionRequest, chat_logprobs, completion_logprobs,
                                      echo_logprobs, joined_logprobs, usage)
from mtpserve.server.sse import DONE, SSEResponse, sse, unless_disconnected

# health() returns True, or False / (False, reason) when the server must not take requests.
HealthCheck = Callable[[], "bool | tuple[bool, str]"]


# The largest request body taken by default (413 beyond it): far more than the longest context in
# JSON, far less than what would stall the server while it is parsed.
DEFAULT_MAX_BODY_BYTES = 16 << 20


def build_app(engine: AsyncEngine, served_model_name: str, *, api_key: str | None = None,
              health: HealthCheck | None = None, model_root: str | None = None,
              max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> FastAPI:
    """health defaults to the engine's own (its output thread is alive); a multi-rank server
    passes one that also knows about the other ranks. model_root is what /v1/models shows as
    the model's root (a name, not a path of the server's file system)."""
    @contextlib.asynccontextmanager
    async def lifespan(_app):
        # Shared metrics (several API servers): this process's counts reach the others' renders.
        syncing = asyncio.create_task(metrics.keep_synced()) if metrics.shared_dir else None
        yield
        if syncing is not None:
            syncing.cancel()

    # /openapi.json and /docs sit behind --api_key like every route but /health.
    app = FastAPI(title="mtpserve", version=__version__, docs_url="/docs", redoc_url=None,
                  openapi_url="/openapi.json", lifespan=lifespan)
    install_error_handlers(app)
    # Added last = outermost: the key, then the body's size, then admission, all before the body is read.
    app.add_middleware(AdmissionMiddleware, check=lambda: precheck(),
                       paths=("/v1/completions", "/v1/chat/completions"))
    app.add_middleware(BodySizeLimitMiddleware, max_bytes=max_body_bytes)
    if api_key:
        app.add_middleware(ApiKeyMiddleware, api_key=api_key)
    metrics = ServerMetrics(engine.stats, served_model_name, rejected=lambda: dict(engine.rejected))
    engine.add_finish_listener(metrics.observe)
    app.state.engine, app.state.metrics = engine, metrics
    created = int(time.time())

    def check_health() -> tuple[bool, str]:
        result = health() if health is not None else (engine.healthy, engine.error or "the engine is not running")
        if isinstance(result, tuple):
            return bool(result[0]), str(result[1])
        return bool(result), "the server is unhealthy"

    def require_healthy() -> None:
        if engine.draining:
            engine.count_rejected("draining")
            raise APIError(503, "the server is shutting down and takes no new requests", code="service_unavailable")
        ok, reason = check_health()
        if not ok:
            raise APIError(503, f"the server cannot take requests: {reason}", code="service_unavailable")

    def check_model(model: str | None) -> None:
        if model is not None and model != served_model_name:
            raise APIError(404, f"the model {model!r} does not exist; this server serves {served_model_name!r}",
                           param="model", code="model_not_found")

    def model_card() -> dict:
        return {"id": served_model_name, "object": "model", "created": created, "owned_by": "mtpserve",
                "root": model_root or served_model_name, "parent": None, "max_model_len": engine.max_model_len}

    # ---- service routes -----------------------------------------------------------------------

    # The OpenAPI document names every status a route answers, so that clients (and schemathesis)
    # can check the answers against it; 401 only comes with --api_key.
    generation_errors = documented_errors(400, 401, 404, 413, 422, 500, 503, 504)
    generation_ok = {200: {"content": {"text/event-stream": {"schema": {"type": "string"}}},
                           "description": "the answer, or server-sent events when stream is true"}}

    @app.get("/health", responses={503: {"model": HealthErrorResponse, "description": "draining or unhealthy"}})
    async def get_health():
        ok, reason = check_health()
        if ok and engine.draining:
            return JSONResponse({"status": "draining", **error_body("the server is shutting down",
                                                                    "service_unavailable", code="draining")},
                                status_code=503)
        if ok:
            return {"status": "ok"}
        return JSONResponse({"status": "unhealthy", **error_body(reason, "service_unavailable",
                                                                 code="service_unavailable")}, status_code=503)

    # Prometheus text; only its 401 is JSON (the schema is a reference: FastAPI would give it text/plain).
    @app.get("/metrics", response_class=PlainTextResponse, responses={401: {
        "description": "Unauthorized",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}}}})
    async def get_metrics():
        return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)

    @app.get("/v1/models", responses=documented_errors(401))
    async def list_models():
        return {"object": "list", "data": [model_card()]}

    @app.get("/v1/models/{model:path}", responses=documented_errors(401, 404, 422))
    async def get_model(model: str):
        check_model(model)
        return model_card()

    # ---- generation ---------------------------------------------------------------------------

    def submit(prompt: Prompt, params: SamplingParams, max_tokens: int | None, prompt_param: str,
               request_id: str) -> RequestStream:
        n, limit = len(prompt.token_ids), engine.max_model_len
        if n >= limit:
            raise APIError(400, f"this model's maximum context length is {limit} tokens, but the prompt has {n} "
                                f"tokens, which leaves no room to generate; shorten the prompt",
                           param=prompt_param, code="context_length_exceeded")
        if max_tokens is not None and n + max_tokens > limit:
            raise APIError(400, f"this model's maximum context length is {limit} tokens, but {n + max_tokens} "
                                f"were requested ({n} in the prompt, {max_tokens} in the completion); "
                                f"shorten the prompt or lower max_tokens",
                           param="max_tokens", code="context_length_exceeded")
        require_healthy()
        try:
            return engine.add_request(prompt.token_ids, params, prompt.text, request_id=request_id)
        except RequestRefused as e:
            param = prompt_param if e.param == "prompt" else e.param
            if param == "max_tokens" and max_tokens is None:
                param = prompt_param  # the default max_tokens fits the cache: the prompt does not
            raise APIError(400, str(e), param=param, code=e.code) from None
        except ValueError as e:
            raise APIError(400, str(e), param=prompt_param) from None
        except Overloaded as e:
            raise APIError(503, str(e), code="server_overloaded",
                           headers={"Retry-After": str(e.retry_after_s)}) from None
        except Draining as e:
            raise APIError(503, str(e), code="service_unavailable") from None
        except RuntimeError as e:
            raise APIError(503, str(e), code="service_unavailable") from None

    def start(prompts: list[Prompt], body, prompt_param: str, request_id: str, **options) -> Samples:
        """Submits the request's samples; omitted max_tokens is whatever context is left. options: more
        arguments of body.sampling_params."""
        params = [body.sampling_params(engine.default_max_tokens(len(p.token_ids)), **options) for p in prompts]
        n, best_of = body.choice_counts()
        max_tokens = body.requested_max_tokens
        return Samples(prompts, params, n, best_of,
                       lambda p, sp, rid: submit(p, sp, max_tokens, prompt_param, rid), request_id)

    def precheck() -> None:
        """Refuses at once what admission control would refuse after tokenizing (AdmissionMiddleware
        asks it before the body is read)."""
        require_healthy()
        try:
            engine.precheck_admission()
        except Overloaded as e:
            raise APIError(503, str(e), code="server_overloaded",
                           headers={"Retry-After": str(e.retry_after_s)}) from None

    async def tokenize(text: str, param: str, add_special_tokens: bool = True) -> list[int]:
        try:
            return await engine.encode(text, add_special_tokens, param=param)
        except RequestRefused as e:
            raise APIError(400, str(e), param=param, code=e.code) from None

    async def complete(raw: Request, samples: Samples) -> list[Sample] | Response:
        """Runs a non-streaming request to its end and returns the chosen samples; a client that
        disconnects first aborts it."""
        async def drain():
            async for _ in samples.deltas():
                pass

        try:
            done, _ = await unless_disconnected(raw, drain())
        finally:
            samples.close()
        if not done:
            return Response(status_code=499)  # nobody is listening any more
        for s in samples.samples:
            if s.stream.timed_out:
                raise APIError(504, s.state.error, code="request_timeout", type="timeout_error")
            if s.state.error:
                raise APIError(500, f"generation failed: {s.state.error}")
        return samples.chosen()

    def total_usage(samples: Samples, chosen: list[Sample], generated: bool = True) -> dict:
        """Each prompt counts once (its first sample's cache hit); every returned choice's tokens count
        (none when the generated ones are not returned)."""
        leaders = samples.samples[::samples.per_prompt]
        return usage(sum(len(p.token_ids) for p in samples.prompts),
                     sum(len(s.state.token_ids) for s in chosen if s.state) if generated else 0,
                     sum(s.state.metrics.num_cached_tokens for s in leaders))

    @app.post("/v1/completions", responses={**generation_ok, **generation_errors})
    async def create_completion(body: CompletionRequest, raw: Request):
        check_model(body.model)
        prompts = [Prompt(await tokenize(p, "prompt"), p) if isinstance(p, str) else Prompt(list(p), None)
                   for p in body.prompt_list()]
        request_id = f"cmpl-{uuid.uuid4().hex}"
        samples = start(prompts, body, "prompt", request_id)
        model, created_at = body.model or served_model_name, int(time.time())
        want_logprobs, echo_only = body.logprobs is not None, body.echo_only

        def chunk(choices: list, **extra) -> dict:
            return {"id": request_id, "object": "text_completion", "created": created_at, "model": model,
                    "choices": choices, **extra}

        def decode(token: int) -> str:
            return engine.tokenizer.decode([token], skip_special_tokens=False)

        def piece(sample: Sample, text: str, token_ids: list[int], entries, offset: int, first: bool):
            """(text, logprobs, text offset after them) of a choice or of a streamed piece of it; the
            first piece carries the echoed prompt."""
            if echo_only:
                text, token_ids, entries = "", [], []
            logprobs = None
            if first and body.echo:
                prompt = samples.prompts[sample.prompt_index]
                text = (prompt.text if prompt.text is not None else engine.tokenizer.decode(prompt.token_ids)) + text
                if want_logprobs:
                    logprobs = echo_logprobs(prompt.token_ids, sample.state.prompt_logprobs, decode)
                    offset = logprobs["text_offset"][-1] + len(logprobs["tokens"][-1])
            if want_logprobs:
                mine = completion_logprobs(token_ids, entries, offset)
                logprobs = joined_logprobs(logprobs, mine) if logprobs else mine
                offset += sum(len(t) for t in mine["tokens"])
            return text, logprobs, offset

        def finish(s) -> tuple[str | None, int | str | None]:
            return ("length", None) if echo_only else (s.finish_reason, s.stop_reason)

        if not body.stream:
            chosen = await complete(raw, samples)
            if isinstance(chosen, Response):
                return chosen
            choices = []
            for i, s in enumerate(chosen):
                text, logprobs, _ = piece(s, s.state.text, s.state.token_ids, s.state.logprobs, 0, True)
                reason, stop_reason = finish(s.state)
                choices.append({"index": i, "text": text, "finish_reason": reason, "stop_reason": stop_reason,
                                "logprobs": logprobs})
            return chunk(choices, usage=total_usage(samples, chosen, not echo_only))

        include_usage = body.include_usage

        async def events():
            offsets: dict[int, int] = {}  # per choice: text offset of its next token; absent before its first piece
            async for sample, d in samples.deltas():
                s, index = d.state, samples.choice_index(sample)
                if s.error:
                    yield sse(error_body(f"generation failed: {s.error}", "server_error"))
                    break
                if echo_only and not d.finished or not (d.text or d.finished or (want_logprobs and d.token_ids)):
                    continue
                text, logprobs, offsets[index] = piece(sample, d.text, d.token_ids, d.logprobs,
                                                       offsets.get(index, 0), index not in offsets)
                reason, stop_reason = finish(s) if d.finished else (None, None)
                choice = {"index": index, "text": text, "logprobs": logprobs, "finish_reason": reason,
                          "stop_reason": stop_reason}
                yield sse(chunk([choice], **({"usage": None} if include_usage else {})))
            if include_usage:
                yield sse(chunk([], usage=total_usage(samples, samples.chosen(), not echo_only)))
            yield DONE

        return SSEResponse(events(), on_close=samples.close)

    @app.post("/v1/chat/completions", responses={**generation_ok, **generation_errors})
    async def create_chat_completion(body: ChatCompletionRequest, raw: Request):
        check_model(body.model)
        try:
            text = await engine.run_text_work(body.template_chars, engine.tokenizer.apply_chat_template,
                                              body.messages, True, body.active_tools)
        except (ValueError, TemplateError) as e:
            raise APIError(400, str(e), param="messages") from None
        ids = await tokenize(text, "messages", add_special_tokens=False)
        request_id = f"chatcmpl-{uuid.uuid4().hex}"
        samples = start([Prompt(ids, text)], body, "messages", request_id, token_id=engine.tokenizer.token_id)
        model, created_at = body.model or served_model_name, int(time.time())
        top_n = (body.top_logprobs or 0) if body.logprobs else None
        parse_calls = body.active_tools is not None

        def chunk(object_: str, choices: list, **extra) -> dict:
            return {"id": request_id, "object": object_, "created": created_at, "model": model,
                    "choices": choices, **extra}

        if not body.stream:
            chosen = await complete(raw, samples)
            if isinstance(chosen, Response):
                return chosen
            choices = []
            for i, s in enumerate(chosen):
                content, calls = tool_calls.parse(s.state.text) if parse_calls else (s.state.text, [])
                message = {"role": "assistant", "content": (content or None) if calls else content}
                if calls:
                    message["tool_calls"] = [c.openai() for c in calls]
                choices.append({"index": i, "message": message,
                                "logprobs": chat_logprobs(s.state.token_ids, s.state.logprobs, top_n)
                                if top_n is not None else None,
                                "finish_reason": "tool_calls" if calls else s.state.finish_reason,
                                "stop_reason": s.state.stop_reason})
            return chunk("chat.completion", choices, usage=total_usage(samples, chosen))

        include_usage = body.include_usage
        extra = {"usage": None} if include_usage else {}

        async def events():
            role_sent: set[int] = set()  # the role rides on each choice's first token
            parsers: dict[int, tool_calls.StreamParser] = {}
            num_calls: dict[int, int] = {}
            async for sample, d in samples.deltas():
                s, index = d.state, samples.choice_index(sample)
                if s.error:
                    yield sse(error_body(f"generation failed: {s.error}", "server_error"))
                    break
                if not (d.text or d.finished or (top_n is not None and d.token_ids)):
                    continue
                text, calls = d.text, []
                if parse_calls:
                    text, calls = parsers.setdefault(index, tool_calls.StreamParser()).feed(d.text, d.finished)
                delta = {"content": text} if text or index not in role_sent else {}
                if calls:
                    first = num_calls.get(index, 0)
                    delta["tool_calls"] = [c.openai(first + j) for j, c in enumerate(calls)]
                    num_calls[index] = first + len(calls)
                if index not in role_sent:
                    delta = {"role": "assistant", **delta}
                    role_sent.add(index)
                choice = {"index": index, "delta": delta,
                          "logprobs": chat_logprobs(d.token_ids, d.logprobs, top_n) if top_n is not None else None,
                          "finish_reason": None}
                if d.finished:
                    choice["finish_reason"] = "tool_calls" if num_calls.get(index) else s.finish_reason
                if d.finished:
                    choice["stop_reason"] = s.stop_reason
                yield sse(chunk("chat.completion.chunk", [choice], **extra))
            if include_usage:
                yield sse(chunk("chat.completion.chunk", [], usage=total_usage(samples, samples.chosen())))
            yield DONE

        return SSEResponse(events(), on_close=samples.close)

    return app
