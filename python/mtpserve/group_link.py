"""The link between rank 0's frontend and the engine of another attention group (data-parallel attention).

Each group's leader (the group's rank 0) runs its own C++ Engine. GroupServer serves it on a socket of the
leader's host: rank 0's GroupClient sends requests (token ids and the Python SamplingParams, turned into
the engine's on the leader, grammars included), aborts, stats and shutdown over one connection, and the
leader streams the engine's outputs back over a second. Step plans and activations never pass here (they
stay on c10d); only what the frontend and the engine exchange does.

The leader publishes its address and a fresh random key in the c10d rendezvous store; the connections
authenticate with the key (multiprocessing.connection's HMAC handshake) before anything is unpickled, so
only a peer that can read the store (the ranks, on the private network the store needs anyway) can talk.
"""
from __future__ import annotations

import logging
import secrets
import socket
import threading
from multiprocessing.connection import Client, Connection, Listener
from types import SimpleNamespace
from typing import Callable

logger = logging.getLogger("mtpserve.group_link")

# How long rank 0 waits for a leader's answer before the group counts as failed.
_ANSWER_TIMEOUT_S = 60.0


def _store_key(group: int) -> str:
    return f"mtpserve/attention_group/{group}"


def plain_output(out) -> SimpleNamespace:
    """A C++ RequestOutput as a picklable object with the same attributes."""
    lp = lambda e: SimpleNamespace(token=e.token, logprob=e.logprob, rank=e.rank, top=list(e.top))  # noqa: E731
    spec = out.spec
    return SimpleNamespace(
        request_id=out.request_id, token_ids=list(out.token_ids), logprobs=[lp(e) for e in out.logprobs],
        prompt_logprobs=[lp(e) for e in out.prompt_logprobs], finished=out.finished,
        finish_reason=out.finish_reason, stop_token=out.stop_token, error=out.error,
        num_prompt_tokens=out.num_prompt_tokens, num_cached_tokens=out.num_cached_tokens,
        spec=plain_spec(spec))


def pump_outputs(engine, deliver: Callable[[list], None], stop: threading.Event) -> None:
    """Hands the C++ engine's outputs, as plain objects, to `deliver` until `stop` is set."""
    while not stop.is_set():
        outputs = engine.get_outputs(0.1)
        if outputs:
            deliver([plain_output(out) for out in outputs])


def plain_spec(spec) -> SimpleNamespace:
    return SimpleNamespace(drafts=spec.drafts, draft_tokens=spec.draft_tokens, accepted_tokens=spec.accepted_tokens,
                           accepted_per_position=list(spec.accepted_per_position), steps_by_k=list(spec.steps_by_k),
                           retired=spec.retired)


STAT_FIELDS = ("running", "waiting", "kv_usage", "prefix_queries", "prefix_hits", "prompt_tokens", "generation_tokens",
               "steps", "preemptions", "target_seconds", "sample_seconds", "draft_seconds", "draft_host_seconds",
               "plan_seconds", "fill_skipped_steps",
               "caught_up_positions", "dropped_positions", "step_seconds", "prompt_step_seconds", "prompt_steps")


def plain_stats(stats) -> SimpleNamespace:
    """A C++ EngineStats as a picklable object with the same attributes."""
    return SimpleNamespace(**{name: getattr(stats, name) for name in STAT_FIELDS}, spec=plain_spec(stats.spec))


def _reachable_host(master_host: str) -> str:
    """This host's address on the route to the master (no packet is sent)."""
    family = socket.AF_INET6 if ":" in master_host else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        probe.connect((master_host, 1))
        return probe.getsockname()[0]


class GroupServer:
    """On a group's leader: serves `core` (an EngineCore) to rank 0 until rank 0 shuts it down or is gone."""

    def __init__(self, core, group: int, store, master_host: str):
        self.core = core
        self._key = secrets.token_bytes(32)
        host = _reachable_host(master_host)
        self._listener = Listener((host, 0), authkey=self._key)
        port = self._listener.address[1]
        store.set(_store_key(group), f"{host}|{port}|{self._key.hex()}")

    def run(self) -> None:
        """Blocks until rank 0 sends shutdown (the engine is shut down then); raises ConnectionError when
        rank 0 goes away without it (the engine is failed first, so it ends its requests)."""
        commands, outputs = self._listener.accept(), self._listener.accept()
        self._listener.close()
        done = threading.Event()
        pump = threading.Thread(target=self._pump, args=(outputs, done), name="mtpserve-group-outputs", daemon=True)
        pump.start()
        try:
            self._serve(commands)
        except (EOFError, OSError) as e:
            self.core.engine.fail("rank 0 (the frontend) is gone")
            raise ConnectionError(f"rank 0 closed the link to this attention group: {e or 'end of stream'}") from None
        finally:
            done.set()
            pump.join()
            outputs.close()
            commands.close()

    def _serve(self, conn: Connection) -> None:
        engine = self.core.engine
        while True:
            message = conn.recv()
            kind = message[0]
            if kind == "add":
                _, request_id, prompt, params = message
                try:
                    engine.add_request(request_id, prompt, params.to_cpp(self.core.grammars))
                    conn.send(("ok",))
                except Exception as e:  # refused: rank 0 raises the same type with the same words
                    conn.send(("refused", isinstance(e, ValueError), str(e)))
            elif kind == "abort":
                engine.abort(message[1])
            elif kind == "stats":
                conn.send(("stats", plain_stats(engine.stats())))
            elif kind == "error":
                conn.send(("error", engine.error()))
            elif kind == "fail":
                engine.fail(message[1])
            elif kind == "shutdown":
                self.core.shutdown()
                conn.send(("ok",))
                return
            else:
                raise ValueError(f"unknown attention-group message {kind!r}")

    def _pump(self, conn: Connection, done: threading.Event) -> None:
        try:
            pump_outputs(self.core.engine, conn.send, done)
        except (EOFError, OSError):
            pass  # rank 0 is gone: the command loop sees it too


class GroupLeaderCore:
    """The first rank of attention group d > 0: the group's EngineCore, served to rank 0 by a GroupServer."""

    def __init__(self, core, group: int, store, master_host: str):
        self.core, self.num_blocks = core, core.num_blocks
        self.server = GroupServer(core, group, store, master_host)

    def run(self) -> None:
        self.server.run()

    @property
    def steps(self) -> int:
        return self.core.engine.stats().steps


class GroupClient:
    """On rank 0: another attention group's engine, with the methods of the C++ Engine that the frontend
    calls (add_request takes the Python SamplingParams). Its outputs go to on_outputs(list)."""

    def __init__(self, group: int, store, on_outputs: Callable[[list], None]):
        self.group = group
        host, port, key = store.get(_store_key(group)).decode().split("|")
        store.delete_key(_store_key(group))  # the next engine of this group publishes afresh
        self._commands = Client((host, int(port)), authkey=bytes.fromhex(key))
        self._outputs = Client((host, int(port)), authkey=bytes.fromhex(key))
        self._lock = threading.Lock()
        self._lost: str | None = None
        self._on_outputs = on_outputs
        self._reader = threading.Thread(target=self._read, name=f"mtpserve-group{group}-outputs", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            while True:
                self._on_outputs(self._outputs.recv())
        except (EOFError, OSError):
            self._lose("its link closed")

    def _lose(self, why: str) -> str:
        if self._lost is None:
            self._lost = f"attention group {self.group}'s engine is unreachable ({why})"
        return self._lost

    def _send(self, *message) -> None:
        """A message that wants no answer; on a lost link there is nobody left to tell (error() says so)."""
        with self._lock:
            try:
                self._commands.send(message)
            except OSError as e:
                self._lose(str(e))

    def _call(self, *message, timeout_s: float = _ANSWER_TIMEOUT_S):
        with self._lock:
            try:
                self._commands.send(message)
                if not self._commands.poll(timeout_s):
                    raise RuntimeError(self._lose(f"no answer in {timeout_s:g} s"))
                return self._commands.recv()
            except (EOFError, OSError) as e:
                raise RuntimeError(self._lose(str(e) or "end of stream")) from None

    def add_request(self, request_id: str, prompt: list[int], params) -> None:
        answer = self._call("add", request_id, list(prompt), params)
        if answer[0] == "refused":
            raise (ValueError if answer[1] else RuntimeError)(answer[2])

    def abort(self, request_id: str) -> None:
        if self._lost is None:
            self._send("abort", request_id)

    def stats(self):
        return self._call("stats")[1]

    def error(self) -> str | None:
        if self._lost is not None:
            return self._lost
        try:
            return self._call("error")[1]
        except RuntimeError as e:
            return str(e)

    def fail(self, reason: str) -> None:
        if self._lost is None:
            self._send("fail", reason)

    def shutdown(self, timeout_s: float = _ANSWER_TIMEOUT_S) -> None:
        if self._lost is None:
            try:
                self._call("shutdown", timeout_s=timeout_s)
            except RuntimeError as e:
                logger.warning("%s", e)
        self._commands.close()
        self._outputs.close()
