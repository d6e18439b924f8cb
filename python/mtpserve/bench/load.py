"""The load one client process sends: requests dispatched at a gamma/Poisson request rate under a concurrency
cap, each streamed into its RequestRecord, and how busy the process's own CPU was meanwhile (a client that is
always busy measures itself as much as the server)."""
from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass

import numpy as np

from mtpserve.bench.metrics import RequestRecord


@dataclass
class TimedRun:
    start: float  # time.perf_counter() at the first dispatch
    end: float  # time.perf_counter() once the last request ended
    records: list[RequestRecord]
    cpu_busy: float  # the process's CPU seconds over the run's wall seconds (1.0: one core busy throughout)


async def _arrivals(n: int, rate: float, burstiness: float, rng: np.random.Generator):
    """Indices 0..n-1, spaced by gamma-distributed gaps of mean 1/rate (Poisson arrivals when burstiness is 1)."""
    for i in range(n):
        yield i
        if i + 1 < n and not math.isinf(rate):
            await asyncio.sleep(float(rng.gamma(shape=burstiness, scale=1.0 / (rate * burstiness))))


def _sender(session, rcfg, requests, indices, concurrency: int | None, on_done):
    """A coroutine function sending requests[j] as the record of request indices[j], under the cap."""
    from mtpserve.bench.client import send_request

    sem = asyncio.Semaphore(concurrency) if concurrency else None

    async def one(j: int) -> RequestRecord:
        req = requests[j]
        rec = RequestRecord(index=indices[j], prompt_len=req.prompt_len, expected_output_len=req.expected_output_len,
                            source_id=req.source_id)
        if sem is None:
            await send_request(session, rcfg, req.prompt, rec)
        else:
            async with sem:
                await send_request(session, rcfg, req.prompt, rec)
        if on_done is not None:
            on_done()
        return rec

    return one


async def send_all(session, rcfg, requests, indices, concurrency: int | None) -> list[RequestRecord]:
    """Every request at once but for the cap (the warm-ups)."""
    one = _sender(session, rcfg, requests, indices, concurrency, None)
    return list(await asyncio.gather(*(one(j) for j in range(len(requests)))))


async def send_timed(session, rcfg, requests, indices, concurrency: int | None, rate: float, burstiness: float,
                     seed: int, on_done=None) -> TimedRun:
    """The timed run: requests dispatched at `rate` per second (inf: all at once) under the cap."""
    one = _sender(session, rcfg, requests, indices, concurrency, on_done)
    rng = np.random.default_rng(seed)
    cpu0, start = time.process_time(), time.perf_counter()
    tasks = []
    async for j in _arrivals(len(requests), rate, burstiness, rng):
        tasks.append(asyncio.create_task(one(j)))
    records = list(await asyncio.gather(*tasks))
    end = time.perf_counter()
    return TimedRun(start=start, end=end, records=records,
                    cpu_busy=(time.process_time() - cpu0) / (end - start) if end > start else 0.0)
