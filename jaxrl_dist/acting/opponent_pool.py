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
from typing import Any

import jax
import numpy as np

from jaxrl_dist.acting.row_policy import ParamsPlayer, RowPolicy
from jaxrl_dist.data import snapshot as npz
from jaxrl_dist.envs.games import Player
from jaxrl_dist.types import (
    PyTree,
    keys_under,
    path_name,
)

SNAPSHOT = "snapshot/"


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


def role_arrays(arrays: dict[str, np.ndarray], role: str) -> dict[str, np.ndarray]:
    """Pool `role`'s arrays (`OpponentPool.to_arrays`) out of `SeatPools.to_bytes`' decoded
    arrays, keyed "<role>/<key>"; empty if it holds none."""
    return keys_under(arrays, f"{role}/")
