"""An opponent pool for self-play: frozen snapshots of the learner, who plays them, how they fare.

The trainer adds a snapshot of the actor params every K updates (`add`); the pool keeps the
newest `capacity`. A `PoolPlayer` plays a game's opponent seats with one snapshot, drawn when the
game starts (`sample`), and reports the learner's result against it when the game ends
(`record`). Sampling (`OpponentPool.SAMPLING`):

- `uniform`: every snapshot alike;
- `latest`: the newest snapshot half the time, else uniform over all;
- `pfsp`: prioritized fictitious self-play (Vinyals et al. 2019, AlphaStar, "f_hard"): weight
  `(1 - x) ** pfsp_exponent` with `x` the learner's score against the snapshot (win 1, draw 0.5,
  smoothed to 0.5 before any game), so the snapshots the learner still loses to are played most.

Snapshot ids only grow, so a game that started against a snapshot dropped meanwhile records
nothing. The pool is a checkpoint item (`to_arrays` / `from_arrays`: the snapshots' leaves under
`snapshot/<id>/<leaf path>`, the statistics and the sampler's RNG as plain arrays), so a resume
takes back the same opponents and the same statistics. Thread-safe: actors sample and record
while the trainer adds.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

import jax
import numpy as np

from jaxrl_dist.acting.row_policy import ParamsPlayer, RowPolicy
from jaxrl_dist.agents.base import ActorCore
from jaxrl_dist.data import snapshot as npz
from jaxrl_dist.envs.games import Player
from jaxrl_dist.envs.seats import FROZEN_ROLE, POOL_ROLE, SNAPSHOT_ROLES, agent_snapshot
from jaxrl_dist.types import (
    PyTree,
    keys_under,
    local_replica,
    path_name,
)

SNAPSHOT = "snapshot/"


class SeatPlan(Protocol):
    """What the seats' pools and roles read of a run's seats (`config.seats`, a `SeatsConfig`,
    satisfies it): actors take these values, not the config's section."""

    pool_capacity: int
    pool_every_updates: int
    pool_sampling: str
    pool_pfsp_exponent: float

    def roles(self, num_games: int) -> list[tuple[str, ...]]: ...

    def snapshot_roles(self) -> set[str]: ...

    def greedy_seat(self, seat: int) -> bool: ...


class OpponentPool:
    """The newest `capacity` snapshots of the learner's actor params, with the learner's record
    against each (see the module docstring)."""

    SAMPLING = ("uniform", "latest", "pfsp")

    def __init__(
        self, capacity: int, sampling: str = "uniform", pfsp_exponent: float = 2.0, seed: int = 0
    ):
        if capacity < 1:
            raise ValueError(f"opponent pool capacity={capacity} must be >= 1")
        if sampling not in self.SAMPLING:
            raise ValueError(f"opponent pool sampling={sampling!r} must be one of {self.SAMPLING}")
        self.capacity, self.sampling, self.pfsp_exponent = capacity, sampling, pfsp_exponent
        self._lock = threading.Lock()
        self._rng = np.random.default_rng(seed)
        self._next_id = 0
        self._params: dict[int, PyTree] = {}  # id -> host params
        self._update: dict[int, int] = {}  # id -> learner update it was taken at
        self._record: dict[int, np.ndarray] = {}  # id -> [wins, draws, losses] of the learner

    def __len__(self) -> int:
        with self._lock:
            return len(self._params)

    def add(self, params: PyTree, update: int) -> int:
        """Adds a host copy of `params` (taken at learner update `update`); drops the oldest
        beyond capacity. Returns the snapshot's id."""
        host = jax.tree.map(np.asarray, jax.device_get(params))
        with self._lock:
            sid, self._next_id = self._next_id, self._next_id + 1
            self._params[sid], self._update[sid] = host, update
            self._record[sid] = np.zeros(3, np.int64)
            while len(self._params) > self.capacity:
                oldest = min(self._params)
                for table in (self._params, self._update, self._record):
                    del table[oldest]
        return sid

    def ids(self) -> list[int]:
        with self._lock:
            return sorted(self._params)

    def params(self, sid: int) -> PyTree | None:
        """The host params of snapshot `sid`, or None once it left the pool."""
        with self._lock:
            return self._params.get(sid)

    def probabilities(self) -> dict[int, float]:
        """The sampling probability of each snapshot now."""
        with self._lock:
            return self._probabilities()

    def _probabilities(self) -> dict[int, float]:
        ids = sorted(self._params)
        if not ids:
            return {}
        if self.sampling == "uniform":
            weights = np.ones(len(ids))
        elif self.sampling == "latest":
            weights = np.full(len(ids), 0.5 / len(ids))
            weights[-1] += 0.5
        else:
            wins, draws, losses = np.stack([self._record[i] for i in ids]).T
            score = (wins + 0.5 * draws + 1.0) / (wins + draws + losses + 2.0)
            weights = (1.0 - score) ** self.pfsp_exponent
        return dict(zip(ids, (weights / weights.sum()).tolist(), strict=True))

    def sample(self) -> int:
        """A snapshot id drawn by the pool's sampling (the pool must not be empty)."""
        with self._lock:
            probs = self._probabilities()
            if not probs:
                raise RuntimeError("the opponent pool is empty: add a snapshot first")
            ids, p = zip(*probs.items(), strict=True)
            return int(self._rng.choice(ids, p=np.asarray(p) / np.sum(p)))

    def record(self, sid: int, learner_return: float) -> None:
        """The learner's result in a game against snapshot `sid` (> 0 win, 0 draw, < 0 loss);
        ignored if `sid` left the pool meanwhile."""
        with self._lock:
            if sid in self._record:
                self._record[sid][0 if learner_return > 0 else 1 if learner_return == 0 else 2] += 1

    def records(self) -> dict[int, dict[str, int]]:
        """`{id: {"update", "wins", "draws", "losses"}}` of the learner against each snapshot."""
        with self._lock:
            return {
                i: {
                    "update": self._update[i],
                    **dict(zip(("wins", "draws", "losses"), self._record[i].tolist(), strict=True)),
                }
                for i in sorted(self._params)
            }

    # --- checkpoints ---------------------------------------------------------------------------

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The whole pool as flat arrays (see the module docstring)."""
        with self._lock:
            ids = sorted(self._params)
            arrays = {
                "ids": np.array(ids, np.int64),
                "updates": np.array([self._update[i] for i in ids], np.int64),
                "records": np.array([self._record[i] for i in ids], np.int64).reshape(-1, 3),
                "next_id": np.array(self._next_id, np.int64),
                "rng": npz.rng_array(self._rng),
            }
            for i in ids:
                for path, leaf in jax.tree_util.tree_flatten_with_path(self._params[i])[0]:
                    arrays[f"{SNAPSHOT}{i}/{path_name(path)}"] = leaf
        return arrays

    def restore_arrays(self, arrays: dict[str, np.ndarray], template: PyTree) -> None:
        """Takes back what `to_arrays` wrote; snapshots get `template`'s tree structure (the
        actor params of the run that resumes)."""
        paths, treedef = jax.tree_util.tree_flatten_with_path(template)
        names = [path_name(path) for path, _ in paths]
        with self._lock:
            self._params.clear(), self._update.clear(), self._record.clear()
            for i, update, record in zip(
                arrays["ids"].tolist(), arrays["updates"].tolist(), arrays["records"], strict=True
            ):
                keys = [f"{SNAPSHOT}{i}/{name}" for name in names]
                missing = [name for name, key in zip(names, keys, strict=True) if key not in arrays]
                if missing:
                    raise ValueError(
                        f"saved opponent snapshot {i} has no leaf {missing[0]!r} of "
                        "this run's params: saved by another network?"
                    )
                self._params[i] = jax.tree.unflatten(treedef, [arrays[key] for key in keys])
                self._update[i], self._record[i] = update, record.astype(np.int64).copy()
            self._next_id = int(arrays["next_id"])
            npz.restore_rng(self._rng, arrays["rng"])


class PoolPlayer(Player):
    """Plays a seat with pool snapshots: one snapshot per game, drawn at the game's first move,
    the learner's result against it recorded at the game's end.

    Args:
      pool: the opponent pool.
      policy: the snapshots' policy over this actor's games (the agent's masked act on its
        device, a memory per game).
      to_device: moves a snapshot's host params where `policy` runs (cached per snapshot).
    """

    def __init__(
        self,
        pool: OpponentPool,
        policy: RowPolicy,
        to_device: Callable[[PyTree], PyTree] = lambda p: p,
    ):
        self._pool, self._policy, self._to_device = pool, policy, to_device
        self._playing: dict[int, int] = {}  # game -> snapshot id
        self._device: dict[int, PyTree] = {}  # snapshot id -> params on the device

    def act(self, obs: np.ndarray, legal_mask: np.ndarray, games: np.ndarray) -> np.ndarray:
        sids = np.array([self._snapshot_for(int(g)) for g in games])
        actions = np.zeros(len(games), np.int32)
        for sid in np.unique(sids):
            rows = np.flatnonzero(sids == sid)
            params, at = self._params(int(sid)), np.asarray(games)[rows]
            actions[rows] = self._policy.act_masked(params, obs[rows], legal_mask[rows], at)
        return actions

    def restart(self) -> None:
        self._policy.restart()

    def end_game(self, game: int, seat_return: float) -> None:
        self._policy.restart(game)
        sid = self._playing.pop(game, None)
        if sid is not None:
            self._pool.record(sid, -seat_return)  # zero-sum: the learner's result is the opposite

    def _snapshot_for(self, game: int) -> int:
        if game not in self._playing:
            self._playing[game] = self._pool.sample()
        return self._playing[game]

    def _params(self, sid: int) -> PyTree:
        if sid not in self._device:
            live = self._pool.ids()  # sorted
            host = self._pool.params(sid)
            if host is None:  # dropped from the pool mid-game: finish it with the newest
                host = self._pool.params(live[-1])
            kept = set(live)  # device copies of dropped snapshots go
            self._device = {s: p for s, p in self._device.items() if s in kept}
            self._device[sid] = self._to_device(host)
        return self._device[sid]


class AgentPlayer(ParamsPlayer):
    """Plays a seat with another agent of the run (`agent:NAME`, `config.agents`): its newest
    published params from its params store, on this actor's device, a memory per game."""

    def __init__(self, store: Any, device: jax.Device, policy: RowPolicy):
        super().__init__(policy)
        self._store, self._device = store, device

    def _params(self) -> PyTree:
        return self._store.get(self._device)[0]


def snapshot_policy(
    core: ActorCore, device: jax.Device, num_games: int, greedy: bool, key: jax.Array
) -> RowPolicy:
    """A snapshot's policy over `num_games` games on `device`: the agent's masked greedy or
    sampled action, each game with its own memory and key stream (`RowPolicy`)."""
    return RowPolicy(core, num_games, greedy, key, device)


class SeatPools:
    """The params behind a run's snapshot roles (`config.seats`): the opponent pool ("pool",
    a snapshot every `pool_every_updates` updates) and the policy the run started with
    ("frozen", one snapshot never replaced); in an agent's view of several, the same of the
    other agents it plays ("pool:NAME", "frozen:NAME": a league across agents), their snapshots
    taken on their own updates, this agent's record against each kept here (its own PFSP).
    One per process: its actors' players sample and record into it; each process saves its own
    (the same snapshots, its own records)."""

    def __init__(self, seats: SeatPlan, seed: int):
        roles = seats.snapshot_roles()
        self.pools: dict[str, OpponentPool] = {}
        if POOL_ROLE in roles:
            self.pools[POOL_ROLE] = OpponentPool(
                seats.pool_capacity, seats.pool_sampling, seats.pool_pfsp_exponent, seed
            )
        if FROZEN_ROLE in roles:
            self.pools[FROZEN_ROLE] = OpponentPool(1, "uniform", seed=seed + 1)
        for i, role in enumerate(sorted(r for r in roles if agent_snapshot(r))):
            if agent_snapshot(role)[0] == POOL_ROLE:
                pool = OpponentPool(
                    seats.pool_capacity, seats.pool_sampling, seats.pool_pfsp_exponent, seed + 2 + i
                )
            else:
                pool = OpponentPool(1, "uniform", seed=seed + 2 + i)
            self.pools[role] = pool
        self._every = seats.pool_every_updates

    def __bool__(self) -> bool:
        return bool(self.pools)

    def agents(self) -> set[str]:
        """The other agents whose snapshots these pools hold."""
        return {agent_snapshot(role)[1] for role in self.pools if agent_snapshot(role)}

    def start(self, params: PyTree, update: int, agent: str = "") -> None:
        """A fresh run: the first snapshot of every pool of the agent's own (`agent` = ""), or
        of other agent `agent`'s, is its starting `params` (taken at its update `update`)."""
        for role, pool in self.pools.items():
            if _owner(role) == agent:
                pool.add(params, update)

    def offer(self, params: PyTree, update: int, agent: str = "") -> None:
        """After the agent's (or other agent `agent`'s) update `update`: its opponent pool
        copies `params` (this process's replica) when a snapshot is due."""
        role = f"{POOL_ROLE}:{agent}" if agent else POOL_ROLE
        if role in self.pools and update % self._every == 0:
            self.pools[role].add(local_replica(params), update)

    def to_bytes(self) -> bytes:
        arrays = {}
        for role, pool in self.pools.items():
            arrays.update({f"{role}/{k}": v for k, v in pool.to_arrays().items()})
        return npz.to_bytes(arrays)

    def restore_bytes(self, saved: np.ndarray, template: PyTree, agent: str = "") -> None:
        """Takes back `to_bytes`' pools of the agent's own (`agent` = "") or of other agent
        `agent`'s; `template`: that agent's actor params."""
        arrays = npz.from_bytes(saved)
        for role, pool in self.pools.items():
            if _owner(role) != agent:
                continue
            mine = role_arrays(arrays, role)
            if not mine:
                raise ValueError(f"the checkpoint holds no {role!r} pool")
            pool.restore_arrays(mine, template)

    def players(
        self, core: ActorCore, device: jax.Device, num_games: int, key: jax.Array
    ) -> dict[str, PoolPlayer]:
        """One actor's `{name: PoolPlayer}` for every name `seated_roles` may give a snapshot
        role of the agent's own ("pool", "pool:greedy", ...), acting on `device` over its
        `num_games` games, each with its own key stream from `key`."""
        own = [role for role in self.pools if not _owner(role)]
        names = [(role, suffix) for role in own for suffix in ("", GREEDY)]
        return {
            role + suffix: PoolPlayer(
                self.pools[role],
                snapshot_policy(core, device, num_games, bool(suffix), k),
                _to(device),
            )
            for (role, suffix), k in zip(names, jax.random.split(key, len(names)), strict=True)
        }

    def agent_players(
        self, others: dict[str, Any], device: jax.Device, num_games: int, key: jax.Array
    ) -> dict[str, PoolPlayer]:
        """One actor's `{role: PoolPlayer}` of the other agents' snapshot roles ("pool:NAME",
        ...), each acting with that agent's actor half (`others[NAME].core`), sampling as
        that agent's own snapshots do whatever its exploration mask."""
        roles = sorted(role for role in self.pools if _owner(role))
        keys = jax.random.split(key, max(1, len(roles)))
        players = {}
        for role, k in zip(roles, keys, strict=False):
            other = others[_owner(role)]
            policy = snapshot_policy(other.core, device, num_games, False, k)
            players[role] = PoolPlayer(self.pools[role], policy, _to(device))
        return players


def _owner(role: str) -> str:
    """The other agent whose snapshots a pool role holds ("pool:NAME" -> NAME), "" for the
    agent's own."""
    other = agent_snapshot(role)
    return other[1] if other else ""


def _to(device: jax.Device) -> Callable[[PyTree], PyTree]:
    return lambda params: jax.device_put(params, device)


def role_arrays(arrays: dict[str, np.ndarray], role: str) -> dict[str, np.ndarray]:
    """Pool `role`'s arrays (`OpponentPool.to_arrays`) out of `SeatPools.to_bytes`' decoded
    arrays, keyed "<role>/<key>"; empty if it holds none."""
    return keys_under(arrays, f"{role}/")


GREEDY = ":greedy"  # the player name of a snapshot role's greedy seats (`exploration_mask`)


def seated_roles(seats: SeatPlan, num_games: int) -> list[tuple[str, ...]]:
    """`seats.roles(num_games)` with snapshot roles of greedy seats named `<role>:greedy`."""
    return [
        tuple(
            r + GREEDY if r in SNAPSHOT_ROLES and seats.greedy_seat(s) else r
            for s, r in enumerate(pattern)
        )
        for pattern in seats.roles(num_games)
    ]
