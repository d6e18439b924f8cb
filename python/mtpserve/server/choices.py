"""The engine requests behind one API request: one per prompt and sample (a batch of prompts, `n`,
`best_of`), merged back into one stream of (choice, delta).

The first sample of each prompt is submitted at once (so a bad request fails before any response
starts); its siblings are submitted when it has produced its first output, so that they find the
prompt's KV blocks in the prefix cache instead of computing them again. Sample i of a seeded request
uses seed + i, which makes every choice reproducible on its own."""
from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass, field
from typing import AsyncIterator, Callable

from mtpserve.output_processor import RequestState
from mtpserve.sampling_params import SamplingParams
from mtpserve.server.async_engine import RequestStream, StreamDelta
from mtpserve.server.errors import APIError


@dataclass
class Prompt:
    token_ids: list[int]
    text: str | None


@dataclass
class Sample:
    prompt_index: int
    sample_index: int  # within its prompt
    params: SamplingParams
    stream: RequestStream | None = None
    started: asyncio.Event = field(default_factory=asyncio.Event)  # first output seen (prompt computed)

    @property
    def state(self) -> RequestState | None:
        return self.stream.state if self.stream is not None else None


# submit(prompt, params, request_id) -> RequestStream, raising APIError for what cannot run.
Submit = Callable[[Prompt, SamplingParams, str], RequestStream]


def sample_params(params: SamplingParams, index: int, need_logprobs: bool) -> SamplingParams:
    """Sample `index`'s own parameters: its seed stream, and the chosen tokens' logprobs when
    best_of has to rank it."""
    changes = {}
    if params.seed is not None:
        changes["seed"] = params.seed + index
    if need_logprobs and params.logprobs is None:
        changes["logprobs"] = 0
    return dataclasses.replace(params, **changes) if changes else params


def cumulative_logprob(state: RequestState) -> float:
    return sum(entry[token].logprob for token, entry in zip(state.token_ids, state.logprobs or []))


class Samples:
    """Every sample of one API request; iterate deltas() once, then close()."""

    def __init__(self, prompts: list[Prompt], params: list[SamplingParams], n: int, best_of: int,
                 submit: Submit, request_id: str):
        """params: one per prompt. Each prompt gets best_of samples, of which n are returned."""
        self.prompts, self.n, self.per_prompt = prompts, n, best_of
        self._submit, self._request_id = submit, request_id
        self._tasks: list[asyncio.Future] = []
        self.samples = [Sample(p, i, sample_params(params[p], i, best_of > n)) for p in range(len(prompts))
                        for i in range(best_of)]
        try:
            for s in self.samples[::best_of]:
                self._start(s)
        except BaseException:
            self.close()
            raise

    def _start(self, s: Sample) -> None:
        rid = self._request_id if len(self.samples) == 1 else f"{self._request_id}-{s.prompt_index}-{s.sample_index}"
        s.stream = self._submit(self.prompts[s.prompt_index], s.params, rid)

    async def deltas(self) -> AsyncIterator[tuple[Sample, StreamDelta]]:
        """Every sample's deltas as they come; raises APIError when a sibling cannot be submitted."""
        if len(self.samples) == 1:  # the common request: no merging, so no task and queue hop per delta
            s = self.samples[0]
            async for d in s.stream:
                yield s, d
            return
        queue: asyncio.Queue = asyncio.Queue()
        self._tasks = [asyncio.ensure_future(self._run(s, queue)) for s in self.samples]
        try:
            for _ in range(len(self._tasks)):
                while (item := await queue.get()) is not None:
                    if isinstance(item, BaseException):
                        raise item
                    yield item
        finally:
            self._cancel()

    def _cancel(self) -> None:
        for t in self._tasks:
            t.cancel()

    async def _run(self, s: Sample, queue: asyncio.Queue) -> None:
        try:
            if s.stream is None:
                await self.samples[s.prompt_index * self.per_prompt].started.wait()
                self._start(s)
            async for d in s.stream:
                s.started.set()
                await queue.put((s, d))
        except APIError as e:
            await queue.put(e)
        finally:
            s.started.set()  # a sibling waits for nothing that will not come
            await queue.put(None)

    def close(self) -> None:
        self._cancel()
        for s in self.samples:
            if s.stream is not None:
                s.stream.close()

    def choice_index(self, s: Sample) -> int:
        """Choices are numbered prompt by prompt, n per prompt (as OpenAI and vLLM number them)."""
        return s.prompt_index * self.n + s.sample_index

    def chosen(self) -> list[Sample]:
        """The samples returned, in choice order: per prompt all of them, or the best n by
        cumulative logprob."""
        out = []
        for p in range(len(self.prompts)):
            group = self.samples[p * self.per_prompt:(p + 1) * self.per_prompt]
            if self.per_prompt > self.n:  # best_of: not streamed, so every sample has ended
                group = sorted(group, key=lambda s: cumulative_logprob(s.state), reverse=True)[:self.n]
            out.extend(group)
        return out
