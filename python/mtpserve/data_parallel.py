"""Data-parallel attention seen from rank 0's frontend: dp_size attention groups, each with its own engine
(scheduler, requests, KV cache, prefix cache), served as one engine. Group 0's engine runs in this process;
the others are reached through GroupClient (group_link.py).

A request goes to the group with the fewest outstanding tokens (prompt tokens not yet computed plus tokens
still to generate, up to max_tokens, of its open requests; ties to the lowest group), and stays there:
its outputs, abort and errors are that group's. Stats are the sum over the groups (KV usage the mean), so
the Prometheus counters, MTP acceptance included, count every group.
"""
from __future__ import annotations

import queue
import threading
from dataclasses import dataclass
from types import SimpleNamespace

from mtpserve.engine_link import STAT_FIELDS, pump_outputs
from mtpserve.group_link import GroupClient

_SUMMED = tuple(name for name in STAT_FIELDS if name != "kv_usage")


class LocalGroup:
    """Group 0's C++ engine, in this process, with GroupClient's methods."""

    def __init__(self, core, on_outputs):
        self.core, self.engine = core, core.engine
        self._stop = threading.Event()
        self._pump = threading.Thread(target=pump_outputs, args=(self.engine.get_outputs, on_outputs, self._stop),
                                      name="mtpserve-group0-outputs", daemon=True)
        self._pump.start()

    def add_request(self, request_id: str, prompt: list[int], params) -> None:
        self.engine.add_request(request_id, prompt, params.to_cpp(self.core.grammars))

    def abort(self, request_id: str) -> None:
        self.engine.abort(request_id)

    def stats(self):
        return self.engine.stats()

    def error(self) -> str | None:
        return self.engine.error()

    def fail(self, reason: str) -> None:
        self.engine.fail(reason)

    def shutdown(self) -> None:
        self.core.shutdown()
        self._stop.set()
        self._pump.join()


@dataclass
class _Open:
    group: int
    outstanding: int
    prompt_pending: bool = True


def sum_stats(stats: list) -> SimpleNamespace:
    """Every group's EngineStats added up (kv_usage: the mean; per-position lists element by element)."""
    total = SimpleNamespace(**{name: sum(getattr(s, name) for s in stats) for name in _SUMMED})
    total.kv_usage = sum(s.kv_usage for s in stats) / len(stats)
    spec = SimpleNamespace(drafts=0, draft_tokens=0, accepted_tokens=0, accepted_per_position=[], steps_by_k=[],
                           retired=0)
    for s in stats:
        spec.drafts += s.spec.drafts
        spec.draft_tokens += s.spec.draft_tokens
        spec.accepted_tokens += s.spec.accepted_tokens
        spec.accepted_per_position = _add_lists(spec.accepted_per_position, s.spec.accepted_per_position)
        spec.steps_by_k = _add_lists(spec.steps_by_k, s.spec.steps_by_k)
        spec.retired += s.spec.retired
    total.spec = spec
    return total


def _add_lists(a: list, b) -> list:
    b = list(b)
    n = max(len(a), len(b))
    return [(a[i] if i < len(a) else 0) + (b[i] if i < len(b) else 0) for i in range(n)]


class DataParallelEngine:
    """The groups' engines as one, with the C++ Engine's methods the frontend calls."""

    def __init__(self, local_core, store, dp_size: int):
        self._outbox: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._open: dict[str, _Open] = {}
        self.requests_by_group = [0] * dp_size
        self._outstanding = [0] * dp_size
        self.groups = [LocalGroup(local_core, self._arrived)]
        try:
            for d in range(1, dp_size):
                self.groups.append(GroupClient(d, store, self._arrived))
        except BaseException:
            for group in self.groups:
                group.shutdown()
            raise

    def add_request(self, request_id: str, prompt: list[int], params) -> None:
        """`params`: the Python SamplingParams (each group makes its engine's own, grammars included)."""
        cost = len(prompt) + params.max_tokens
        with self._lock:
            if request_id in self._open:
                raise ValueError(f"request id {request_id!r} is already in use")
            group = min(range(len(self.groups)), key=lambda d: (self._outstanding[d], d))
            self._open[request_id] = _Open(group, cost)
            self._outstanding[group] += cost
        try:
            self.groups[group].add_request(request_id, prompt, params)
        except BaseException:
            self._close(request_id)
            raise
        with self._lock:
            self.requests_by_group[group] += 1

    def _arrived(self, outputs: list) -> None:
        with self._lock:
            for out in outputs:
                request = self._open.get(out.request_id)
                if request is None:
                    continue
                done = len(out.token_ids) + (out.num_prompt_tokens if request.prompt_pending else 0)
                request.prompt_pending = False
                if out.finished:
                    done = request.outstanding
                    del self._open[out.request_id]
                done = min(done, request.outstanding)
                request.outstanding -= done
                self._outstanding[request.group] -= done
        self._outbox.put(outputs)

    def _close(self, request_id: str) -> None:
        with self._lock:
            request = self._open.pop(request_id, None)
            if request is not None:
                self._outstanding[request.group] -= request.outstanding

    def get_outputs(self, timeout_s: float) -> list:
        try:
            outputs = list(self._outbox.get(timeout=timeout_s))
        except queue.Empty:
            return []
        while True:
            try:
                outputs += self._outbox.get_nowait()
            except queue.Empty:
                return outputs

    def abort(self, request_id: str) -> None:
        with self._lock:
            request = self._open.get(request_id)
        if request is not None:
            self.groups[request.group].abort(request_id)

    def stats(self) -> SimpleNamespace:
        total = sum_stats([group.stats() for group in self.groups])
        with self._lock:
            total.requests_by_group = list(self.requests_by_group)
        return total

    def error(self) -> str | None:
        for group in self.groups:
            error = group.error()
            if error:
                return error
        return None

    def fail(self, reason: str) -> None:
        for group in self.groups:
            group.fail(reason)

    def shutdown(self) -> None:
        # The other groups first: under lockstep any group's engine that stops takes every other one along.
        for group in self.groups[1:]:
            group.shutdown()
        self.groups[0].shutdown()


class DataParallelCore:
    """What the frontend (AsyncEngine) wraps: group 0's EngineCore (tokenizer, model config, limits) with the
    groups' engines as its engine; submit() routes requests to a group."""

    def __init__(self, local_core, store, dp_size: int):
        self.local = local_core
        self.args, self.model, self.tokenizer = local_core.args, local_core.model, local_core.tokenizer
        self.grammars, self.max_model_len, self.num_blocks = (local_core.grammars, local_core.max_model_len,
                                                              local_core.num_blocks)
        self.engine = DataParallelEngine(local_core, store, dp_size)

    def submit(self, request_id: str, prompt: list[int], params) -> None:
        self.engine.add_request(request_id, prompt, params)

    def shutdown(self) -> None:
        self.engine.shutdown()
