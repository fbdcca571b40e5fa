"""The actor's side of a central inference server (`inference_server.py`): `ServerHandle`, where
clients find the current server of one inference device (the supervisor swaps in a restarted
one), and `ServerClient`, a `PolicyClient` that sends an actor slot's requests to it and, when
the server dies, re-registers with the next one and resends."""

from __future__ import annotations

import threading
import time
from typing import Any

import jax
import numpy as np

from jaxrl_dist.acting.policy_client import ActResult
from jaxrl_dist.agents.base import ActorIdentity
from jaxrl_dist.threads import POLL_S
from jaxrl_dist.types import PyTree

# How long a client waits for a new live server after its server died; then RuntimeError.
DEAD_SERVER_TIMEOUT_S = 30.0
# `inference_server.InferenceServer`, typed loosely: neither module imports the other.
Server = Any


def _dead(server: Server) -> bool:
    """Failed, or started and ended (a server not yet started is not dead)."""
    return server.error is not None or (server.ident is not None and not server.is_alive())


class ServerHandle:
    """Where clients find the current server of one inference device; the supervisor swaps in a
    restarted server (`handle.server = new`), which wakes the clients waiting for one."""

    def __init__(self, server: Server | None = None):
        self._server = server
        self._changed = threading.Condition()

    @property
    def server(self) -> Server:
        return self._server

    @server.setter
    def server(self, server: Server) -> None:
        with self._changed:
            self._server = server
            self._changed.notify_all()

    def wait_for_change(self, timeout: float) -> None:
        """Returns when a server is swapped in, or after `timeout` s."""
        with self._changed:
            self._changed.wait(timeout)


class ServerClient:
    """A `PolicyClient` for actor `slot` of a server: `act` sends a request and waits for its
    reply in POLL_S slices. If the server dies, it waits (up to DEAD_SERVER_TIMEOUT_S, else
    RuntimeError) for a new live server in the handle, registers its slot there with
    `fold_in(key, generation)` (the per-env state restarts) and resends; None once stopped."""

    def __init__(
        self,
        handle: ServerHandle,
        slot: int,
        identity: ActorIdentity,
        key: jax.Array,
        stop: threading.Event,
    ):
        self._handle, self._slot, self._identity, self._stop = handle, slot, identity, stop
        self._generation = 0
        self._server = handle.server
        self.reset(key)

    def reset(self, key: jax.Array, keep_memory: bool = False) -> None:
        """Re-initialises this slot's per-env state from `key` (lockstep: at every unroll;
        `keep_memory`: each env's recurrent state stays)."""
        self._key = key
        self._server.register(self._slot, self._identity, key, keep_memory)

    def memory(self) -> PyTree:
        return self._server.memory(self._slot)

    def set_memory(self, memory: PyTree) -> None:
        self._server.set_memory(self._slot, memory)

    def act(
        self, obs: np.ndarray, env_ids: np.ndarray, min_version: int = 0, first=None
    ) -> ActResult | None:
        """Results for `obs [B, ...]` of the envs `env_ids [B]`, params version >= min_version,
        `first [B]` the ones that start an episode."""
        while True:
            server = self._live_server()
            if server is None:
                return None
            # A request joins a batch with other actors' requests, and the server serves a batch
            # with params new enough for all of them: one that needs an unpublished version
            # (lockstep: this actor's next unroll, while another still acts this one) would hold
            # the others hostage. So wait for the version here, alone.
            if min_version and not server.params_published(min_version, self._stop):
                return None
            request = server.submit(self._slot, obs, env_ids, min_version, first)
            while True:
                result = request.wait(POLL_S)
                if result is not None:
                    return result
                if self._stop.is_set():
                    return None
                if request.failed or _dead(server):
                    result = request.wait(0)  # served just before the server died?
                    if result is not None:
                        return result
                    break

    def _live_server(self) -> Server | None:
        """The server this slot is registered with, or (after a death or a swap) the next live
        one, registered with; None once stopped."""
        if self._handle.server is self._server and not _dead(self._server):
            return self._server
        old, deadline = self._server, time.monotonic() + DEAD_SERVER_TIMEOUT_S
        while not self._stop.is_set():
            server = self._handle.server
            if server is not old and server.is_alive() and server.error is None:
                self._generation += 1
                key = jax.random.fold_in(self._key, self._generation)
                server.register(self._slot, self._identity, key)
                self._server = server
                return server
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"inference server {old.index} died ({old.error!r}) and no new server "
                    f"came up within {DEAD_SERVER_TIMEOUT_S:g}s (actor slot {self._slot})"
                )
            self._handle.wait_for_change(POLL_S)
        return None
