"""This process's acting: actor threads, their policy clients and (with `inference.client =
"server"`) the central inference servers, all supervised within one restart budget.

Actor `slot` of process `p` has the global index `g = p * num_actor_threads + slot`; its env
seed and key fold in `g`: no two actors of a run share a stream, and an actor slot gets the same
stream however the run's actors are spread over processes.
- Asynchronous actors also fold in the update the run starts from, so a resumed run does not
  replay the first run's episodes and samples, and a restart count (fresh episodes).
- Lockstep actors (`config.deterministic`) derive their env seed from the env epoch and their
  actor state per unroll (`lockstep.py`): nothing depends on when the run was resumed.
"""

from __future__ import annotations

import functools
import math
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from jaxrl_dist.acting.actor import Actor, ActorShared, ActorThread
from jaxrl_dist.acting.inference_server import InferenceServer
from jaxrl_dist.acting.lockstep import LockstepActor, LockstepProgress
from jaxrl_dist.acting.opponent_pool import AgentPlayer
from jaxrl_dist.acting.params_store import ActingRound, ParamsStore
from jaxrl_dist.acting.policy_client import LocalClient, jit_inference_step
from jaxrl_dist.acting.seat_pools import SeatPools, seated_roles, snapshot_policy
from jaxrl_dist.acting.server_client import ServerClient, ServerHandle
from jaxrl_dist.acting.supervisor import RestartBudget, Supervisor
from jaxrl_dist.acting.xla_actor import XlaActor
from jaxrl_dist.agents.base import ActorCore, ActorIdentity
from jaxrl_dist.envs import derive_seed, make_env
from jaxrl_dist.envs.agents import AgentStreams
from jaxrl_dist.envs.games import scripted_player
from jaxrl_dist.envs.seats import AGENT_ROLE, LEARNER, SeatedGame

ACTOR_SEED_PURPOSE = 1  # derive_seed/fold_in path of the actors' env seeds and keys
LOCKSTEP_SEED_PURPOSE = 3  # derive_seed path of lockstep actors' env seeds (per env epoch)
SEAT_PLAYERS_SEED_PURPOSE = 4  # derive_seed path of the scripted players' RNGs in seated games
LEAGUE_KEY_PURPOSE = 1  # fold_in of the other agents' snapshot players' keys (a league)


class Fleet:
    """Starts and supervises this process's actors (and inference servers).

    Args:
      config: the run's `TrainConfig`.
      core: the agent's actor half.
      devices: this process's actor devices (actors round-robin over them).
      store: the published params.
      shared: what the actors share (the data seam's writer, stop flag, stats, sizes).
      start_update: the update the run starts from.
      start_unroll: lockstep actors' first unroll (None: `start_update`; a replay's rounds
        count apart from its updates, `data/lockstep_replay.py`).
      replay: lockstep resume, `{global actor index: ([n, T, num_envs, ...] env actions, the
        recurrent states after them or None)}`.
      pools: the params of the seats' snapshot roles (`config.seats`), if any.
      others: the run's other agents by name (`config.agents`), who play the seats named
        `agent:NAME` with their current params (`sebulba/lane.py`'s `OtherAgent`).
      greedy: the actors act greedily (`config.exploration_mask`).
    """

    def __init__(
        self,
        config: Any,
        core: ActorCore,
        devices: list[jax.Device],
        store: ParamsStore,
        shared: ActorShared,
        start_update: int = 0,
        replay: dict[int, np.ndarray] | None = None,
        start_unroll: int | None = None,
        pools: SeatPools | None = None,
        others: dict[str, Any] | None = None,
        greedy: bool = False,
    ):
        self._config, self._core, self._devices = config, core, devices
        self._pools, self._others, self._greedy = pools, others or {}, greedy
        # A greedy seat among exploring ones (`seats.exploration_mask`, a replay agent).
        self._greedy_streams = config.seats.greedy_streams(config.sebulba.envs_per_actor)
        self._store, self._shared, self._start = store, shared, start_update
        n = config.sebulba.num_actor_threads
        self._first = jax.process_index() * n
        self._identity = lambda slot: ActorIdentity(self._first + slot, jax.process_count() * n)
        root = jax.random.fold_in(jax.random.PRNGKey(config.seed), ACTOR_SEED_PURPOSE)
        self._root = root if config.deterministic else jax.random.fold_in(root, start_update)
        self._progress = {}
        for slot in range(n):
            actions, memory = (replay or {}).get(self._first + slot, (None, None))
            first = start_update if start_unroll is None else start_unroll
            self._progress[slot] = LockstepProgress(first, replay=actions, memory=memory)
        budget = RestartBudget(
            config.sebulba.actor_max_restarts, config.sebulba.actor_restart_window_s
        )
        self._budget = budget
        self._handles: list[ServerHandle] = []
        self._last_inference: tuple[dict[str, float], float] = ({}, time.monotonic())
        self.servers: Supervisor | None = None
        if config.sebulba.inference.client == "server":
            server_devices = self._server_devices()
            self._handles = [ServerHandle() for _ in server_devices]
            spawn = self._server_spawner(server_devices, shared.stop)
            self.servers = Supervisor(spawn, len(server_devices), budget, "inference server")
        local_greedy = greedy
        if self._greedy_streams is not None and not greedy:  # per stream; the padding row last
            local_greedy = np.append(self._greedy_streams, False)
        self._local_step = jit_inference_step(core, local_greedy)
        self.actors = Supervisor(
            self._spawn_actor,
            n,
            budget,
            "actor",
            hang_timeout_s=config.sebulba.actor_hang_timeout_s,
        )

    @property
    def restarts(self) -> int:
        servers = self.servers.restarts if self.servers is not None else 0
        return self.actors.restarts + servers + len(self._budget.spent_on)

    def check(self) -> None:
        """Restarts dead servers, then dead actors (RunError once the budget is spent)."""
        if self.servers is not None:
            self.servers.check()
        self.actors.check()

    def join(self, timeout_s: float) -> None:
        self.actors.join(timeout_s)
        if self.servers is not None:
            self.servers.join(timeout_s)

    def inference_record(self) -> dict[str, float]:
        """The servers' batching since the last call, for the log (empty without servers):
        requests and envs per batch, the padded share of the rows, and the share of each
        second the servers spent in the jitted step."""
        totals: dict[str, float] = {}
        for handle in self._handles:
            for k, v in handle.server.stats().items():
                if k not in ("version", "queued"):
                    totals[k] = totals.get(k, 0.0) + v
        if not totals:
            return {}
        now, (last, since) = time.monotonic(), self._last_inference
        delta = {k: v - last.get(k, 0.0) for k, v in totals.items()}
        self._last_inference = (totals, now)
        batches = max(1.0, delta["batches"])
        return {
            "inference/requests_per_batch": delta["requests"] / batches,
            "inference/envs_per_batch": delta["rows"] / batches,
            "inference/padded_fraction": delta["padded_rows"]
            / max(1.0, delta["rows"] + delta["padded_rows"]),
            "inference/step_busy": delta["step_s"] / max(1e-9, now - since) / len(self._handles),
        }

    # ------------------------------------------------------------------ servers
    def _server_devices(self) -> list[jax.Device]:
        ids = self._config.sebulba.inference.device_ids
        if not ids:
            return list(dict.fromkeys(self._devices))
        local = sorted(jax.local_devices(), key=lambda d: d.id)
        return [local[i] for i in ids]

    def _server_spawner(self, devices: list[jax.Device], stop: threading.Event) -> Callable:
        cfg = self._config
        per_server = math.ceil(cfg.sebulba.num_actor_threads / len(devices))  # slots round-robin
        batch = cfg.sebulba.inference.batch_size or per_server * cfg.recv_rows

        def spawn(index: int, restarts: int) -> InferenceServer:
            server = InferenceServer(
                index=index,
                core=self._core,
                store=self._store,
                device=devices[index],
                slots=cfg.sebulba.num_actor_threads,
                envs_per_slot=cfg.streams_per_actor,
                max_batch=batch,
                timeout_ms=cfg.sebulba.inference.timeout_ms,
                broadcast_period=cfg.sebulba.inference.broadcast_period,
                stop=stop,
                greedy=self._server_greedy(),
            )
            server.start()
            self._handles[index].server = server
            return server

        return spawn

    def _server_greedy(self) -> Any:
        """The servers' `greedy`: the fleet's, or per state row (each actor slot's streams in
        turn, then the padding row) where seats have greedy streams."""
        if self._greedy or self._greedy_streams is None:
            return self._greedy
        slots = self._config.sebulba.num_actor_threads
        return np.append(np.tile(self._greedy_streams, slots), False)

    # ------------------------------------------------------------------ actors
    def _players(
        self, device: jax.Device, at: ActingRound | None, num_games: int, key: jax.Array
    ) -> dict[str, Any]:
        """One actor's players of the pools' snapshot roles and of the other agents' seats
        (`agent:NAME`, with that agent's current params; a lockstep actor's, `at`, with its
        params of the round the actor plays), on `device`."""
        # A one-agent run's pool players keep the key they always had.
        pool_key, others_key = jax.random.split(key) if self._others else (key, key)
        players = {}
        if self._pools:
            players = self._pools.players(self._core, device, num_games, pool_key, at)
        keys = jax.random.split(others_key, max(1, len(self._others)))
        for (name, other), k in zip(sorted(self._others.items()), keys, strict=False):
            policy = snapshot_policy(other.core, device, num_games, other.greedy, k)
            players[AGENT_ROLE + name] = AgentPlayer(other.store, device, policy, other.rounds, at)
        if self._pools and self._pools.agents():  # a league: the other agents' snapshots
            league_key = jax.random.fold_in(others_key, LEAGUE_KEY_PURPOSE)
            players |= self._pools.agent_players(self._others, device, num_games, league_key, at)
        return players

    def _client(self, slot: int, key: jax.Array):
        cfg, identity = self._config, self._identity(slot)
        if self._handles:
            handle = self._handles[slot % len(self._handles)]
            return ServerClient(handle, slot, identity, key, self._shared.stop)
        device = self._devices[slot % len(self._devices)]
        return LocalClient(
            step=self._local_step,
            core=self._core,
            store=self._store,
            device=device,
            identity=identity,
            num_envs=cfg.streams_per_actor,
            key=key,
            stop=self._shared.stop,
            pad_to=cfg.recv_rows if cfg.seats.enabled else 0,  # recv() sizes vary with seats
        )

    def _spawn_actor(self, slot: int, restarts: int) -> ActorThread:
        cfg, g = self._config, self._first + slot
        # Restarted async actors take fresh streams (first incarnations keep the old ones).
        again = (restarts,) if restarts and not cfg.deterministic else ()
        key = jax.random.fold_in(self._root, g)
        key = jax.random.fold_in(key, restarts) if again else key

        def make(generation: int = 0, group: int = 0):
            """The actor's EnvPool, or with `env_groups_per_actor` its group `group`: envs
            `group * n ..` of the actor's, seeded as one pool of them all would be."""
            if cfg.deterministic:
                path = (LOCKSTEP_SEED_PURPOSE, generation, g, *again)
            else:
                path = (ACTOR_SEED_PURPOSE, self._start, g, *again)
            groups = cfg.sebulba.env_groups_per_actor
            num_envs, batch = cfg.sebulba.envs_per_actor // groups, cfg.env_batch_size // groups
            threads = cfg.sebulba.env_threads_per_actor or batch
            if cfg.seats.enabled and _holds_streams(cfg):
                # The seated game gathers its games one at a time and may hold some
                # (`seated`), on one EnvPool thread unless env_threads_per_actor says: a
                # board game steps faster so than with a thread per game handing results
                # over one by one (`benchmarks/seated_gather.py`).
                batch = 1
            env = make_env(
                cfg.env_id,
                cfg.env_kwargs,
                num_envs,
                batch,
                seed=(derive_seed(cfg.seed, *path) + group * num_envs) & 0x7FFF_FFFF,
                num_threads=cfg.sebulba.env_threads_per_actor,
                thread_affinity_offset=pool_affinity(
                    cfg.sebulba.env_thread_affinity_offset, g, threads
                ),
                restart=self._budget.allow_for,  # a Python env's worker: the actors' budget
                step_timeout_s=cfg.sebulba.actor_hang_timeout_s,
                start_timeout_s=cfg.sebulba.env_start_timeout_s,
            )
            if cfg.sebulba.agents_per_env > 1:
                players_key = jax.random.fold_in(key, SEAT_PLAYERS_SEED_PURPOSE)
                players = {}  # the other agents' slots (an agent's view of several)
                if snapshots is not None and cfg.sebulba.agent_slots:  # a row per (env, slot)
                    rows = env.config["num_envs"] * cfg.sebulba.agents_per_env
                    players = snapshots(rows, players_key)
                slots = cfg.sebulba.agent_slots
                return AgentStreams(
                    env, cfg.sebulba.agents_per_env, cfg.sebulba.team_reward, slots, players
                )
            seed = derive_seed(cfg.seed, SEAT_PLAYERS_SEED_PURPOSE, *path[1:])
            return seated(cfg, env, seed, snapshots)

        snapshots = None  # this actor's snapshot players: the pools' params on its device
        device = self._devices[slot % len(self._devices)]
        if self._pools or self._others:
            at = None
            if cfg.deterministic:
                progress = self._progress[slot]
                at = ActingRound(
                    lambda: progress.playing,
                    lambda: progress.next_unroll,
                    self._shared.stop,
                    progress.results.append,
                )
            snapshots = functools.partial(self._players, device, at)

        if cfg.sebulba.actor_loop == "xla":
            device = self._devices[slot % len(self._devices)]
            actor = XlaActor(
                index=g,
                make_env=make,
                core=self._core,
                store=self._store,
                device=device,
                identity=self._identity(slot),
                key=key,
                shared=self._shared,
                groups=cfg.sebulba.env_groups_per_actor,
            )
            actor.start()
            return actor
        client = self._client(slot, key)
        if cfg.deterministic:
            progress = self._progress[slot]
            if restarts:
                progress.restart_point(cfg.sebulba.env_epoch_updates)
            actor = LockstepActor(
                g,
                make,
                client,
                self._shared,
                key=key,
                progress=progress,
                epoch_updates=cfg.sebulba.env_epoch_updates,
            )
        else:
            actor = Actor(g, make, client, self._shared)
        actor.start()
        return actor


def pool_affinity(offset: int, actor: int, threads: int, cpus: int | None = None) -> int:
    """EnvPool's `thread_affinity_offset` for actor `actor`'s pool of `threads` threads (its
    global index: processes on one host pin to different cores): the actors' pools on
    consecutive cores from `offset`, wrapping at `cpus` (default: the cores this process may
    use); -1 (no pinning) stays -1. EnvPool itself wraps a pool's later threads."""
    if offset < 0:
        return -1
    cpus = cpus or len(os.sched_getaffinity(0))
    return (offset + actor * threads) % cpus


OPENING_STREAM = 1  # the random openings' generator beside the scripted players' (`seated`)


def seated(config: Any, env: Any, seed: int, snapshots: Callable | None = None) -> Any:
    """`env` as a `SeatedGame` with `config.seats`' roles (gathering its games under
    synchronous collection and in deterministic mode), or `env` itself when the run has no
    seats. Scripted players draw from `seed`; `snapshots(num_games, key)` gives the snapshot
    roles' players (`SeatPools.players`)."""
    if not config.seats.enabled:
        return env
    roles = seated_roles(config.seats, env.config["num_envs"])
    rng = np.random.default_rng(seed)
    names = {name for r in roles for name in r} - {LEARNER}
    players = {}
    if snapshots is not None:
        players = snapshots(env.config["num_envs"], jax.random.PRNGKey(seed))
    for name in sorted(names - set(players)):
        players[name] = scripted_player(name, config.env_id, rng)
    opening = np.random.default_rng([seed, OPENING_STREAM])
    return SeatedGame(
        env, roles, players, config.seats.opening_plies, opening, _holds_streams(config)
    )


def _holds_streams(config: Any) -> bool:
    """Whether the actors hold streams whose unroll is full (`actor.UnrollGate`): synchronous
    collection and lockstep actors; a seated game's pool then gathers its games one by one."""
    return config.sebulba.sync_collection or config.deterministic
