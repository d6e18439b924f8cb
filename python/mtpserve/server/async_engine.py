"""The C++ engine seen from asyncio.

One background thread blocks in engine.get_outputs (the GIL is released there) and hands every
delta to the asyncio queue of its request on that request's event loop. Each request is a
RequestStream: an async iterator of StreamDelta that detokenizes, applies stop strings (a stop
string aborts the request in the engine), holds back streamed text that could still become a stop
string, and aborts the request in the engine when it is closed early (client gone, task
cancelled)."""
from __future__ import annotations

import asyncio
import logging
import threading
import uuid
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


class RequestStream:
    """Async iterator of StreamDelta for one request; the last one has finished=True."""

    def __init__(self, owner: "AsyncEngine", state: RequestState, queue: asyncio.Queue):
        self._owner, self.state, self._queue = owner, state, queue
        self._sent = 0  # characters of state.text already handed out
        self._engine_done = False  # the engine sent its final output: nothing left to abort
        self._closed = False

    @property
    def request_id(self) -> str:
        return self.state.request_id

    def __aiter__(self) -> "RequestStream":
        return self

    async def __anext__(self) -> StreamDelta:
        while not self._closed:
            item = await self._queue.get()
            out = self._fail(item.message) if isinstance(item, _EngineFailed) else self._process(item)
            if out is not None:
                if out.finished:
                    self.close()
                return out
        raise StopAsyncIteration

    def _process(self, delta) -> StreamDelta | None:
        state = self.state
        self._engine_done = self._engine_done or delta.finished
        before = len(state.token_ids)
        if state.process(delta):  # a stop string ended it: the engine may still be generating
            self._owner.abort(state.request_id)
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

    def _fail(self, message: str) -> StreamDelta:
        self._engine_done = True
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
            except Exception:  # interpreter shutdown
                pass


class AsyncEngine:
    """Wraps an EngineCore (or anything with .engine, .tokenizer, .max_model_len)."""

    def __init__(self, core):
        self.core = core
        self.engine = core.engine
        self.tokenizer = core.tokenizer
        self.max_model_len: int = core.max_model_len
        self._finish_listeners: list[Callable[[RequestState], None]] = []
        self._streams: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Queue]] = {}
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self.error: str | None = None  # set when the output thread died: the engine is unusable
        self._thread = threading.Thread(target=self._pump, name="mtpserve-outputs", daemon=True)
        self._thread.start()

    # ---- health and shutdown ------------------------------------------------------------------

    @property
    def healthy(self) -> bool:
        return self.error is None and not self._stopping.is_set() and self._thread.is_alive()

    def fail(self, reason: str) -> None:
        """The engine cannot serve any more (a rank failed): refuse new requests and end every open
        stream with `reason` now, whether or not the C++ engine can still report them."""
        if self.error is None:
            self.error = reason
        self._fail_all(reason)

    def shutdown(self) -> None:
        """Stops the output thread, ends open streams with an error, and shuts the engine down."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        self._thread.join()
        self._fail_all("the server is shutting down")
        self.core.shutdown()

    # ---- requests -----------------------------------------------------------------------------

    def add_request(self, prompt_token_ids: list[int], params: SamplingParams, prompt: str | None = None,
                    request_id: str | None = None) -> RequestStream:
        """Submits a request; raises ValueError for input the engine refuses (prompt too long,
        token id out of the vocabulary, ...) and RuntimeError when the engine is not running.
        Must be called on the event loop that will iterate the returned stream."""
        if not self.healthy:
            raise RuntimeError(self.error or "the engine is not running")
        loop = asyncio.get_running_loop()
        request_id = request_id or uuid.uuid4().hex
        state = RequestState(request_id, prompt, list(prompt_token_ids), params, self.tokenizer)
        queue: asyncio.Queue = asyncio.Queue()
        with self._lock:  # registered first, so that no early output can be missed
            if request_id in self._streams:
                raise ValueError(f"request id {request_id!r} is already in use")
            self._streams[request_id] = (loop, queue)
        try:
            self.engine.add_request(request_id, state.prompt_token_ids, params.to_cpp())
        except Exception:
            with self._lock:
                self._streams.pop(request_id, None)
            raise
        return RequestStream(self, state, queue)

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
                        target = self._streams.get(out.request_id)
                        if target is not None:  # else: closed already (aborted, or ended by a stop string)
                            by_loop.setdefault(target[0], []).append((target[1], out))
                for loop, items in by_loop.items():
                    _deliver_threadsafe(loop, items)
        except Exception as e:  # the engine is broken: fail every open request rather than hang it
            logger.exception("the engine output thread failed")
            self.error = f"engine failure: {type(e).__name__}: {e}"
            self._fail_all(self.error)

    def _fail_all(self, message: str) -> None:
        with self._lock:
            targets = list(self._streams.values())
        by_loop: dict[asyncio.AbstractEventLoop, list] = {}
        for loop, queue in targets:
            by_loop.setdefault(loop, []).append((queue, _EngineFailed(message)))
        for loop, items in by_loop.items():
            _deliver_threadsafe(loop, items)


def _deliver(items) -> None:
    for queue, item in items:
        queue.put_nowait(item)


def _deliver_threadsafe(loop: asyncio.AbstractEventLoop, items) -> None:
    try:
        loop.call_soon_threadsafe(_deliver, items)
    except RuntimeError:  # that loop is closed: nobody is waiting for these any more
        pass
