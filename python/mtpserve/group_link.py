"""The link between rank 0's frontend and the engine of another attention group (data-parallel attention).

Each group's leader (the group's rank 0) runs its own C++ Engine. GroupServer serves it (an EngineServer,
engine_link.py) on a socket of the leader's host to rank 0's GroupClient: requests, aborts, stats and shutdown
one way, the engine's outputs the other. Step plans and activations never pass here (they stay on c10d); only
what the frontend and the engine exchange does.

The leader publishes its address and the server's fresh random key in the c10d rendezvous store, so only a peer
that can read the store (the ranks, on the private network the store needs anyway) can talk.
"""
from __future__ import annotations

import socket
import threading
from typing import Callable

from mtpserve.engine_link import EngineClient, EngineServer, pump_outputs


def _store_key(group: int) -> str:
    return f"mtpserve/attention_group/{group}"


def _reachable_host(master_host: str) -> str:
    """This host's address on the route to the master (no packet is sent)."""
    family = socket.AF_INET6 if ":" in master_host else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        probe.connect((master_host, 1))
        return probe.getsockname()[0]


class GroupServer:
    """On a group's leader: serves `core` (an EngineCore) to rank 0 until rank 0 shuts it down or is gone."""

    def __init__(self, core, group: int, store, master_host: str):
        self._lost: str | None = None
        self._server = EngineServer(core, (_reachable_host(master_host), 0), clients=1, on_lost=self._on_lost)
        host, port = self._server.address
        store.set(_store_key(group), f"{host}|{port}|{self._server.key.hex()}")

    def _on_lost(self, client: int, why: str) -> None:
        self._server.core.engine.fail("rank 0 (the frontend) is gone")
        self._lost = why

    def run(self) -> None:
        """Blocks until rank 0 sends shutdown (the engine is shut down then); raises ConnectionError when
        rank 0 goes away without it (the engine is failed first, so it ends its requests)."""
        self._server.run()
        if self._lost is not None:
            raise ConnectionError(f"rank 0 closed the link to this attention group: {self._lost}")


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


class GroupClient(EngineClient):
    """On rank 0: another attention group's engine (an EngineClient), whose outputs a thread hands to
    on_outputs(list)."""

    def __init__(self, group: int, store, on_outputs: Callable[[list], None]):
        self.group = group
        host, port, key = store.get(_store_key(group)).decode().split("|")
        store.delete_key(_store_key(group))  # the next engine of this group publishes afresh
        super().__init__((host, int(port)), bytes.fromhex(key), what=f"attention group {group}'s engine")
        self._closing = threading.Event()
        self._reader = threading.Thread(target=self._read, args=(on_outputs,), name=f"mtpserve-group{group}-outputs",
                                        daemon=True)
        self._reader.start()

    def _read(self, on_outputs: Callable[[list], None]) -> None:
        try:
            pump_outputs(self.get_outputs, on_outputs, self._closing)
        except RuntimeError:
            pass  # the link is gone: error() says so

    def close(self) -> None:
        """Stops the reader first: it holds on_outputs's owner (and so the engines), which must not outlive
        the process group."""
        self._closing.set()
        self._reader.join()
        super().close()
