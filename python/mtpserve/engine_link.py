"""One C++ engine served to frontends in other processes: the API servers of `--api_server_count`, and rank 0's
frontend for another attention group's engine (data-parallel attention, group_link.py).

A client opens two connections to the EngineServer's listener. Both authenticate with the server's random key
(multiprocessing.connection's HMAC handshake) before anything is unpickled, then name their client and role. On
the first the client sends requests (token ids and the Python SamplingParams, turned into the engine's in the
engine's process, grammars included), aborts and queries, and reads the answers. On the second it reads the
outputs of its own requests, which the server's one output thread routes by request id.
"""
from __future__ import annotations

import logging
import secrets
import threading
from multiprocessing.connection import Client, Connection, Listener
from types import SimpleNamespace
from typing import Callable, Iterator

from mtpserve import _C

logger = logging.getLogger("mtpserve.engine_link")

# How long a client waits for the engine's answer before the engine counts as unreachable.
_ANSWER_TIMEOUT_S = 60.0

STAT_FIELDS = ("running", "waiting", "kv_usage", "prefix_queries", "prefix_hits", "prompt_tokens", "generation_tokens",
               "steps", "preemptions", "target_seconds", "sample_seconds", "draft_seconds", "draft_host_seconds",
               "plan_seconds", "fill_skipped_steps",
               "caught_up_positions", "dropped_positions", "step_seconds", "prompt_step_seconds", "prompt_steps")


# Where an output's state (Engine.get_output_states) holds these fields: the RequestOutput's order.
_REQUEST_ID, _FINISHED = (_C.RequestOutput.__match_args__.index(name) for name in ("request_id", "finished"))


def plain_stats(stats) -> SimpleNamespace:
    """A C++ EngineStats as a picklable object with the same attributes."""
    return SimpleNamespace(**{name: getattr(stats, name) for name in STAT_FIELDS}, spec=stats.spec)


def pump_outputs(get_outputs: Callable[[float], list], deliver: Callable[[list], None], stop: threading.Event) -> None:
    """Hands every batch of outputs that get_outputs(timeout_s) returns to `deliver` until `stop` is set."""
    while not stop.is_set():
        outputs = get_outputs(0.1)
        if outputs:
            deliver(outputs)


class EngineServer:
    """Serves `core` (an EngineCore) to `clients` clients that connect to `address` with `key`.

    run() returns once every client has sent shutdown (the first one shuts the core down) or gone away (a client
    that never connects keeps it waiting; the others are served from when each connects). What a client that went
    away had open is aborted in the engine, and on_lost(client, why) is called."""

    def __init__(self, core, address, clients: int = 1, on_lost: Callable[[int, str], None] | None = None):
        self.core, self.clients, self._on_lost = core, clients, on_lost
        self.key = secrets.token_bytes(32)
        self._listener = Listener(address, authkey=self.key)
        self.address = self._listener.address
        self._lock = threading.Lock()
        self._owner: dict[str, int] = {}  # open request id -> its client
        self._outputs: dict[int, Connection] = {}
        self._done = threading.Event()
        self._pump = threading.Thread(target=pump_outputs,
                                      args=(core.engine.get_output_states, self._route, self._done),
                                      name="mtpserve-engine-outputs", daemon=True)

    def run(self) -> None:
        self._pump.start()
        commands: dict[int, Connection] = {}
        loops = []
        try:
            for client, conn in self._accept():  # each client is served from when it has connected
                commands[client] = conn
                loops.append(threading.Thread(target=self._serve_client, args=(client, conn), daemon=True,
                                              name=f"mtpserve-client{client}-commands"))
                loops[-1].start()
            for loop in loops:
                loop.join()
        finally:
            self.stop()
            for conn in [*commands.values(), *self._outputs.values()]:
                conn.close()

    def stop(self) -> None:
        """Stops taking the engine's outputs, so that the engine can be shut down; run() returns once its clients
        have gone."""
        self._done.set()
        if self._pump.is_alive():
            self._pump.join()

    def _accept(self) -> Iterator[tuple[int, Connection]]:
        """Each client, with its command connection, once both of its connections have arrived (in whatever
        order)."""
        commands: dict[int, Connection] = {}
        try:
            while len(commands) < self.clients or len(self._outputs) < self.clients:
                conn = self._listener.accept()
                role, client = conn.recv()
                if not 0 <= client < self.clients or client in (commands if role == "commands" else self._outputs):
                    conn.close()
                    raise ConnectionError(f"an engine client named itself {client} ({role}); expected "
                                          f"{self.clients} clients, each once")
                (commands if role == "commands" else self._outputs)[client] = conn
                if client in commands and client in self._outputs:
                    yield client, commands[client]
        finally:
            self._listener.close()

    def _route(self, states: list) -> None:
        """Sends each client the states (Engine.get_output_states) of its requests' outputs."""
        by_client: dict[int, list] = {}
        with self._lock:
            for state in states:
                client = (self._owner.pop if state[_FINISHED] else self._owner.get)(state[_REQUEST_ID], None)
                if client is not None:  # else: aborted by its client, which no longer reads it
                    by_client.setdefault(client, []).append(state)
        for client, outs in by_client.items():
            try:
                self._outputs[client].send(outs)
            except OSError:
                pass  # that client is gone: its command loop sees it too

    def _serve_client(self, client: int, conn: Connection) -> None:
        try:
            self._serve(client, conn)
        except (EOFError, OSError) as e:
            why = str(e) or "end of stream"
            for request_id in self._forget(client):
                self.core.engine.abort(request_id)
            if self._on_lost is not None:
                self._on_lost(client, why)

    def _forget(self, client: int) -> list[str]:
        with self._lock:
            gone = [request_id for request_id, owner in self._owner.items() if owner == client]
            for request_id in gone:
                del self._owner[request_id]
        return gone

    def _serve(self, client: int, conn: Connection) -> None:
        engine = self.core.engine
        while True:
            message = conn.recv()
            kind = message[0]
            if kind == "add":
                self._add(client, conn, *message[1:])
            elif kind == "abort":
                with self._lock:
                    self._owner.pop(message[1], None)
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
                raise ValueError(f"unknown engine-link message {kind!r}")

    def _add(self, client: int, conn: Connection, request_id: str, prompt: list[int], params) -> None:
        with self._lock:  # owned first, so that no early output is missed
            taken = request_id in self._owner
            if not taken:
                self._owner[request_id] = client
        if taken:
            conn.send(("refused", True, f"request id {request_id!r} is already in use"))
            return
        try:
            self.core.engine.add_request(request_id, prompt, params.to_cpp(self.core.grammars))
            conn.send(("ok",))
        except Exception as e:  # refused: the client raises the same type with the same words
            with self._lock:
                self._owner.pop(request_id, None)
            conn.send(("refused", isinstance(e, ValueError), str(e)))


class EngineClient:
    """An EngineServer's engine, with the methods of the C++ Engine that a frontend calls (add_request takes the
    Python SamplingParams); `what` names the engine in errors."""

    def __init__(self, address, key: bytes, client: int = 0, what: str = "the engine"):
        self.what = what
        self._commands = Client(address, authkey=key)
        self._commands.send(("commands", client))
        self._outputs = Client(address, authkey=key)
        self._outputs.send(("outputs", client))
        self._lock = threading.Lock()
        self._lost: str | None = None

    def _lose(self, why: str) -> str:
        if self._lost is None:
            self._lost = f"{self.what} is unreachable ({why})"
        return self._lost

    @property
    def lost(self) -> str | None:
        """Why the engine is unreachable, once it is."""
        return self._lost

    def get_outputs(self, timeout_s: float) -> list:
        """The outputs that arrived within timeout_s (all that are waiting); raises RuntimeError once the link
        is gone."""
        try:
            if not self._outputs.poll(timeout_s):
                return []
            states = list(self._outputs.recv())
            while self._outputs.poll(0):
                states += self._outputs.recv()
            return _C.request_outputs(states)
        except (EOFError, OSError) as e:
            raise RuntimeError(self._lose(str(e) or "its link closed")) from None

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
        """Shuts the engine down (data-parallel groups: rank 0 ends every group's engine)."""
        if self._lost is None:
            try:
                self._call("shutdown", timeout_s=timeout_s)
            except RuntimeError as e:
                logger.warning("%s", e)
        self.close()

    def close(self) -> None:
        """Leaves the engine running (API servers: the engine's process shuts it down)."""
        self._commands.close()
        self._outputs.close()
