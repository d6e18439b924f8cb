"""The C++ engine seen from asyncio.

One background thread blocks in engine.get_outputs (the GIL is released there) and hands every
delta to the asyncio queue of its request on that request's event loop. Each request is a
RequestStream: an async iterator of StreamDelta that detokenizes, applies stop strings (a stop
string aborts the request in the engine), holds back streamed text that could still become a stop
string, and aborts the request in the engine when it is closed early (client gone, task
cancelled)."""
from __future__ import annotations

import asyncio
import functools
import logging
import math
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import AsyncIterator, Callable

from mtpserve.output_processor import RequestState
from mtpserve.outputs import Logprob
from mtpserve.sampling_params import SamplingParams

logger = logging.getLogger("mtpserve.server")


@dataclass
class StreamDelta:
    """What one engine output added to a request. Unpacks as (text, token_ids, finished, state)."""
    text: str  # new text that can be shown now (never taken back later)
    token_ids: list[int]  # new tokens (not held back: a stop string ends text, not tokens)
    finished: bool
    state: RequestState  # the whole request so far: .text, .token_ids, .finish_reason, .error, .metrics
    logprobs: list[dict[int, Logprob]] | None = None  # one entry per new token when logprobs were asked for

    def __iter__(self):
        return iter((self.text, self.token_ids, self.finished, self.state))


class _EngineFailed:
    def __init__(self, message: str):
        self.message = message


_INT64_MAX = (1 << 63) - 1
INLINE_CHARS = 8192  # text this short is tokenized on the event loop (AsyncEngine.run_text_work)


class RequestRefused(ValueError):
    """Input the server refuses (HTTP 400 / gRPC INVALID_ARGUMENT); param names the request field
    when it is known, code is OpenAI's error code (e.g. context_length_exceeded)."""

    def __init__(self, message: str, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.param, self.code = param, code


class Overloaded(RuntimeError):
    """The server is full (admission control): HTTP 503 with Retry-After / gRPC RESOURCE_EXHAUSTED."""

    def __init__(self, message: str, reason: str, retry_after_s: int = 1):
        super().__init__(message)
        self.reason, self.retry_after_s = reason, retry_after_s


class Draining(RuntimeError):
    """The server is shutting down and takes no new requests (HTTP 503 / gRPC UNAVAILABLE)."""


class RequestStream:
    """Async iterator of StreamDelta for one request; the last one has finished=True."""

    def __init__(self, owner: "AsyncEngine", state: RequestState, queue: asyncio.Queue,
                 timeout_s: float | None = None):
        self._owner, self.state, self._queue = owner, state, queue
        self._sent = 0  # characters of state.text already handed out
        self._engine_done = False  # the engine sent its final output: nothing left to abort
        self._closed = False
        self.timeout_s = timeout_s
        self._deadline = time.monotonic() + timeout_s if timeout_s else None
        self.timed_out = False  # ended by --request_timeout (state.error says so too)
        self._failure: _EngineFailed | None = None  # met while taking queued outputs together; handed out next

    @property
    def request_id(self) -> str:
        return self.state.request_id

    def __aiter__(self) -> "RequestStream":
        return self

    async def __anext__(self) -> StreamDelta:
        while not self._closed:
            if self._failure is not None:
                item, self._failure = self._failure, None
            elif self._deadline is None:
                item = await self._queue.get()
            else:
                try:
                    item = await asyncio.wait_for(self._queue.get(), max(self._deadline - time.monotonic(), 0))
                except asyncio.TimeoutError:
                    self.timed_out = True
                    out = self._fail(f"the request did not finish within {self.timeout_s:g} s (the server's "
                                     f"--request_timeout); it was aborted", aborted=False)
                    self.close()  # aborts it in the engine: its KV blocks are freed
                    return out
            out = self._fail(item.message) if isinstance(item, _EngineFailed) else self._process(item)
            if out is not None:
                if out.finished:
                    self.close()
                return out
        raise StopAsyncIteration

    def _process(self, delta) -> StreamDelta | None:
        """The engine's output, and every later one already queued, as one delta: where the consumer falls behind
        the engine (many streams on one event loop), it sends fewer, larger chunks instead of falling further
        behind one token at a time."""
        before = len(self.state.token_ids)
        deltas = [delta]
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if isinstance(item, _EngineFailed):
                self._failure = item  # after what came before it
                break
            deltas.append(item)
        self._absorb(deltas)
        return self._emit(before)

    def _absorb(self, deltas: list) -> None:
        state = self.state
        self._engine_done = self._engine_done or deltas[-1].finished
        if state.process(deltas):  # a stop string ended it: the engine may still be generating
            self._owner.abort(state.request_id)
        if state.error and self._owner.describe_failure is not None:
            state.error = self._owner.describe_failure(state.error)

    def _emit(self, before: int) -> StreamDelta | None:
        """What the state gained since it held `before` tokens."""
        state = self.state
        token_ids = state.token_ids[before:]
        logprobs = state.logprobs[before:] if state.logprobs is not None else None
        if state.finished:
            text = state.text[self._sent:]
            self._sent = len(state.text)
        else:
            safe = state.stops.safe_len(state.text) if state.stops else len(state.text)
            text = state.text[self._sent:safe] if safe > self._sent else ""
            self._sent = max(self._sent, safe)
        if not (text or token_ids or state.finished):
            return None
        return StreamDelta(text, token_ids, state.finished, state, logprobs)

    def _fail(self, message: str, aborted: bool = True) -> StreamDelta:
        """aborted: the engine has ended the request already (nothing left to abort)."""
        self._engine_done = self._engine_done or aborted
        if self._owner.describe_failure is not None:
            message = self._owner.describe_failure(message)
        self.state.error = message
        return StreamDelta("", [], True, self.state, [] if self.state.logprobs is not None else None)

    def close(self) -> None:
        """Ends the stream; a request the engine is still running is aborted there (its KV blocks
        are freed). Safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        if not self._engine_done:
            self._owner.abort(self.state.request_id)
        self._owner._finish(self)

    async def aclose(self) -> None:
        self.close()

    def __del__(self):
        # A stream dropped without close(): still free the request in the engine. No locks here
        # (the garbage collector may run this anywhere), so no on_finished callback either.
        if not self._closed:
            self._closed = True
            try:
                if not self._engine_done:
                    self._owner.abort(self.state.request_id)
                self._owner._streams.pop(self.state.request_id, None)
                self._owner._dequeue(self.state.request_id)
            except Exception:  # interpreter shutdown
                pass


class AsyncEngine:
    """Wraps an EngineCore (or anything with .engine, .tokenizer, .max_model_len)."""

    def __init__(self, core, *, max_queue_len: int | None = None, max_queued_tokens: int | None = None,
                 request_timeout_s: float | None = None):
        """max_queue_len / max_queued_tokens: admission control: a request that would make more
        than that many requests (prompt tokens) wait for their first output is refused with
        Overloaded. request_timeout_s: every request is aborted (its blocks freed) after it."""
        self.core = core
        self.engine = core.engine
        self._submit = getattr(core, "submit", None)
        self.tokenizer = core.tokenizer
        self.grammars = getattr(core, "grammars", None)  # structured output's GrammarMasker
        self.max_model_len: int = core.max_model_len
        model_config = getattr(getattr(core, "model", None), "config", None)
        self.vocab_size: int | None = getattr(model_config, "vocab_size", None) or getattr(self.tokenizer, "vocab_size",
                                                                                        None)
        args = getattr(core, "args", None)
        num_blocks, block_size = getattr(core, "num_blocks", None), getattr(args, "block_size", None)
        self.num_speculative_tokens: int = getattr(args, "num_speculative_tokens", 0) or 0
        # Tokens one sequence can ever hold in the KV cache (None: unknown).
        self.cache_capacity_tokens: int | None = (num_blocks * block_size
                                                  if isinstance(num_blocks, int) and isinstance(block_size, int)
                                                  else None)
        self.block_size = block_size
        for name, value in (("max_queue_len", max_queue_len), ("max_queued_tokens", max_queued_tokens)):
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1 or None, got {value}")
        if request_timeout_s is not None and not request_timeout_s > 0:
            raise ValueError(f"request_timeout must be > 0 or None, got {request_timeout_s}")
        self.max_queue_len, self.max_queued_tokens = max_queue_len, max_queued_tokens
        self.request_timeout_s = request_timeout_s
        self.rejected: dict[str, int] = {}  # admission refusals by reason (queue_len, queued_tokens, draining)
        self._queued: dict[str, int] = {}  # request id -> prompt tokens, until its first output
        self._queued_tokens = 0
        self.draining = False  # set by drain(): no new requests
        # Turns an engine failure's text (e.g. a collective backend's) into what clients are told.
        self.describe_failure: Callable[[str], str] | None = None
        self._tokenize_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="mtpserve-tokenize")
        self._finish_listeners: list[Callable[[RequestState], None]] = []
        self._streams: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Queue]] = {}
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._error: str | None = None  # set when the output thread died or fail() was called
        self._thread = threading.Thread(target=self._pump, name="mtpserve-outputs", daemon=True)
        self._thread.start()

    # ---- health and shutdown ------------------------------------------------------------------

    @property
    def error(self) -> str | None:
        """Why the engine cannot serve: the output thread died, fail() was called, or a step failed
        inside the C++ engine (which then ends every request and refuses new ones)."""
        return self._error or self.engine.error()

    @property
    def healthy(self) -> bool:
        return self.error is None and not self._stopping.is_set() and self._thread.is_alive()

    def fail(self, reason: str) -> None:
        """The engine cannot serve any more (a rank failed): refuse new requests and end every open
        stream with `reason` now, whether or not the C++ engine can still report them."""
        if self._error is None:
            self._error = reason
        self._fail_all(reason)

    def shutdown(self) -> None:
        """Stops the output thread, ends open streams with an error, and shuts the engine down."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        self._thread.join()
        self._fail_all("the server is shutting down")
        self._tokenize_pool.shutdown(wait=False, cancel_futures=True)
        self.core.shutdown()

    def fail_open(self, reason: str) -> None:
        """Ends every open stream with `reason` (the drain's deadline passed); the engine stays up."""
        with self._lock:
            ids = list(self._streams)
        for request_id in ids:
            self.abort(request_id)
        self._fail_all(reason)

    def drain(self) -> None:
        """Takes no new requests from now on (Draining); open ones go on."""
        self.draining = True

    # ---- input checks (shared by the HTTP and gRPC APIs) --------------------------------------

    async def encode(self, text: str, add_special_tokens: bool = True, param: str = "prompt") -> list[int]:
        """Tokenizes (see run_text_work for where), after refusing text that cannot be valid or cannot fit
        without tokenizing it."""
        check_text(text, param)
        bound = self.tokenizer.max_chars_per_token
        if bound is not None and len(text) > self.max_model_len * bound:
            raise RequestRefused(f"this model's maximum context length is {self.max_model_len} tokens, but the "
                                 f"prompt has {len(text)} characters, more than that many tokens can hold; "
                                 f"shorten the prompt", param=param, code="context_length_exceeded")
        return await self.run_text_work(len(text), functools.partial(self.tokenizer.encode, text, add_special_tokens,
                                                                     release_gil=len(text) > INLINE_CHARS))

    async def run_text_work(self, chars: int, fn, *args):
        """fn(*args), work on `chars` characters of text (tokenizing, a chat template): on the event loop when
        that is at most INLINE_CHARS, else on the tokenizer threads, so that a long prompt does not stall other
        requests or /health. Small work holds the GIL as long either way, and the hop to a thread and back
        waits behind every stream the loop serves (16 of the 17 ms a request spent before the engine at c = 64
        on an H200's host, docs/benchmarks.md)."""
        if chars <= INLINE_CHARS:
            return fn(*args)
        return await asyncio.get_running_loop().run_in_executor(self._tokenize_pool, fn, *args)

    def default_max_tokens(self, num_prompt_tokens: int) -> int:
        """max_tokens when a request leaves it out: what is left of the context, and of the cache."""
        room = self.max_model_len
        if self.cache_capacity_tokens is not None:
            room = min(room, self.cache_capacity_tokens - self.num_speculative_tokens)
        return max(room - num_prompt_tokens, 1)

    def check_request(self, prompt_token_ids: list[int], params: SamplingParams) -> None:
        """Raises RequestRefused for what the engine could never run: token ids outside the
        vocabulary, a request that needs more KV blocks than the whole cache has."""
        vocab = self.vocab_size
        for i, t in enumerate(prompt_token_ids):
            if not isinstance(t, int) or isinstance(t, bool) or not 0 <= t < (vocab or _INT64_MAX):
                where = f"[0, {vocab})" if vocab else "the token ids"
                raise RequestRefused(f"prompt token id {t!r} (position {i}) is outside the vocabulary {where}",
                                     param="prompt", code="invalid_token_id")
        for t in params.logit_bias or {}:
            if vocab and t >= vocab:
                raise RequestRefused(f"logit_bias token id {t} is outside the vocabulary [0, {vocab})",
                                     param="logit_bias", code="invalid_token_id")
        capacity = self.cache_capacity_tokens
        if capacity is not None:
            need = len(prompt_token_ids) + params.max_tokens + self.num_speculative_tokens
            if need > capacity:
                bs = self.block_size
                raise RequestRefused(
                    f"the request needs up to {math.ceil(need / bs)} KV-cache blocks ({len(prompt_token_ids)} "
                    f"prompt tokens + max_tokens {params.max_tokens}), but the server's whole cache has "
                    f"{capacity // bs} blocks of {bs} tokens; lower max_tokens or shorten the prompt",
                    param="max_tokens", code="context_length_exceeded")

    def precheck_admission(self) -> None:
        """Raises Overloaded when a request would be refused anyway, before any work is spent on it
        (tokenizing): a burst is answered at once. add_request checks again, exactly."""
        with self._lock:
            full = ((self.max_queue_len is not None and len(self._queued) >= self.max_queue_len)
                    or (self.max_queued_tokens is not None and self._queued_tokens >= self.max_queued_tokens))
            if full:
                try:
                    self._admit("", 1 << 62)  # raises (and counts) with the reason
                finally:
                    self._dequeue("")  # in case it did not

    def _admit(self, request_id: str, num_tokens: int) -> None:
        """Admission control; called with the lock held."""
        reason = message = None
        if self.max_queue_len is not None and len(self._queued) >= self.max_queue_len:
            reason = "queue_len"
            message = (f"the server is overloaded: {len(self._queued)} requests are already waiting "
                       f"(--max_queue_len {self.max_queue_len}); retry later")
        elif (self.max_queued_tokens is not None and self._queued
              and self._queued_tokens + num_tokens > self.max_queued_tokens):
            reason = "queued_tokens"
            message = (f"the server is overloaded: {self._queued_tokens} prompt tokens are already waiting "
                       f"(--max_queued_tokens {self.max_queued_tokens}); retry later")
        if reason is not None:
            self.count_rejected(reason)
            raise Overloaded(message, reason)
        self._queued[request_id] = num_tokens
        self._queued_tokens += num_tokens

    def count_rejected(self, reason: str) -> None:
        with self._lock:
            self.rejected[reason] = self.rejected.get(reason, 0) + 1

    def _dequeue(self, request_id: str) -> None:
        """Called with the lock held: the request got its first output, or ended."""
        n = self._queued.pop(request_id, None)
        if n is not None:
            self._queued_tokens -= n

    @property
    def num_queued(self) -> int:
        with self._lock:
            return len(self._queued)

    # ---- requests -----------------------------------------------------------------------------

    def add_request(self, prompt_token_ids: list[int], params: SamplingParams, prompt: str | None = None,
                    request_id: str | None = None) -> RequestStream:
        """Submits a request; raises ValueError for input the engine refuses (prompt too long,
        token id out of the vocabulary, ...) and RuntimeError when the engine is not running.
        Must be called on the event loop that will iterate the returned stream."""
        if not self.healthy:
            raise RuntimeError(self.error or "the engine is not running")
        if self.draining:
            self.count_rejected("draining")
            raise Draining("the server is shutting down and takes no new requests")
        loop = asyncio.get_running_loop()
        request_id = request_id or uuid.uuid4().hex
        self.check_request(prompt_token_ids, params)
        state = RequestState(request_id, prompt, list(prompt_token_ids), params, self.tokenizer)
        queue: asyncio.Queue = asyncio.Queue()
        with self._lock:  # registered first, so that no early output can be missed
            if request_id in self._streams:
                raise ValueError(f"request id {request_id!r} is already in use")
            self._admit(request_id, len(state.prompt_token_ids))
            self._streams[request_id] = (loop, queue)
        try:
            if self._submit is not None:  # the core routes requests itself (data-parallel attention groups)
                self._submit(request_id, state.prompt_token_ids, params)
            else:
                self.engine.add_request(request_id, state.prompt_token_ids, params.to_cpp(self.grammars))
        except Exception:
            with self._lock:
                self._streams.pop(request_id, None)
                self._dequeue(request_id)
            raise
        return RequestStream(self, state, queue, self.request_timeout_s)

    async def generate(self, prompt_token_ids: list[int], params: SamplingParams, prompt: str | None = None,
                       request_id: str | None = None) -> AsyncIterator[StreamDelta]:
        """add_request + iteration; leaving the loop early (or cancelling) aborts the request."""
        stream = self.add_request(prompt_token_ids, params, prompt, request_id)
        try:
            async for delta in stream:
                yield delta
        finally:
            stream.close()

    def add_finish_listener(self, listener: Callable[[RequestState], None]) -> None:
        """listener(state) is called once for every request when its stream closes: finished,
        failed or aborted (metrics use this, whichever frontend the request came from)."""
        self._finish_listeners.append(listener)

    def abort(self, request_id: str) -> None:
        if not self._stopping.is_set():
            self.engine.abort(request_id)

    def stats(self):
        return self.engine.stats()

    @property
    def num_open_streams(self) -> int:
        with self._lock:
            return len(self._streams)

    # ---- internals ----------------------------------------------------------------------------

    def _finish(self, stream: RequestStream) -> None:
        with self._lock:
            self._streams.pop(stream.request_id, None)
            self._dequeue(stream.request_id)
        for listener in self._finish_listeners:
            try:
                listener(stream.state)
            except Exception:
                logger.exception("a request-finished listener failed")

    def _pump(self) -> None:
        try:
            while not self._stopping.is_set():
                outputs = self.engine.get_outputs(0.1)
                if not outputs:
                    continue
                by_loop: dict[asyncio.AbstractEventLoop, list] = {}
                with self._lock:
                    for out in outputs:
                        self._dequeue(out.request_id)
                        target = self._streams.get(out.request_id)
                        if target is not None:  # else: closed already (aborted, or ended by a stop string)
                            by_loop.setdefault(target[0], []).append((target[1], out))
                for loop, items in by_loop.items():
                    _deliver_threadsafe(loop, items)
        except Exception as e:  # the engine is broken: fail every open request rather than hang it
            logger.exception("the engine output thread failed")
            self._error = f"engine failure: {type(e).__name__}: {e}"
            self._fail_all(self._error)

    def _fail_all(self, message: str) -> None:
        with self._lock:
            targets = list(self._streams.values())
        by_loop: dict[asyncio.AbstractEventLoop, list] = {}
        for loop, queue in targets:
            by_loop.setdefault(loop, []).append((queue, _EngineFailed(message)))
        for loop, items in by_loop.items():
            _deliver_threadsafe(loop, items)


def check_text(text: str, param: str = "prompt") -> None:
    """Refuses text that is not valid Unicode (a lone surrogate from a JSON escape such as
    "\\ud800"): the tokenizer cannot encode it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise RequestRefused(f"{param} is not valid Unicode: a lone surrogate {text[e.start]!r} at character "
                             f"{e.start}", param=param) from None


def _deliver(items) -> None:
    for queue, item in items:
        queue.put_nowait(item)


def _deliver_threadsafe(loop: asyncio.AbstractEventLoop, items) -> None:
    try:
        loop.call_soon_threadsafe(_deliver, items)
    except RuntimeError:  # that loop is closed: nobody is waiting for these any more
        pass
