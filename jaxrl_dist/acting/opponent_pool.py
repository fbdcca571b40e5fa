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

import functools
import threading
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from jaxrl_dist.acting.params_store import ActingRound, ActingStopped, RoundParams
from jaxrl_dist.acting.row_policy import ParamsPlayer, RowPolicy
from jaxrl_dist.data import snapshot as npz
from jaxrl_dist.envs.games import Player
from jaxrl_dist.threads import POLL_S
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
        # Lockstep mode (`lockstep`): the round each snapshot is drawn from on, and the records
        # of the recent rounds, by round, not yet summed into `_record`.
        self._epoch: int | None = None
        self._round: dict[int, int] = {}
        self._recent: dict[int, dict[int, np.ndarray]] = {}
        self._reached = -1  # the owner's newest round: its snapshots drawn from it on are in
        self._changed = threading.Condition(self._lock)

    def lockstep(self, epoch_updates: int, fixed: bool = False) -> None:
        """Deterministic mode: actors draw with `draw` and record with `record_at` (see
        `draw`); the snapshots any actor may still draw from are kept. `fixed`: a pool that
        never takes a snapshot after its start (a frozen start), whose draws never wait."""
        self._epoch = epoch_updates
        if fixed:
            self._reached = 1 << 62

    def __len__(self) -> int:
        with self._lock:
            return len(self._params)

    def add(self, params: PyTree, update: int, round_: int | None = None) -> int:
        """Adds a host copy of `params` (taken at learner update `update`, drawn from round
        `round_` on in lockstep mode: the owner's next round; default `update`); drops the
        oldest beyond capacity (in lockstep mode, the ones no round still played can draw).
        Returns the snapshot's id."""
        host = jax.tree.map(np.asarray, jax.device_get(params))
        with self._lock:
            sid, self._next_id = self._next_id, self._next_id + 1
            self._params[sid], self._update[sid] = host, update
            self._round[sid] = update if round_ is None else round_
            if round_ is None:  # a start: its round is reached
                self._reached = max(self._reached, update)
                self._changed.notify_all()
            self._record[sid] = np.zeros(3, np.int64)
            if self._epoch is None:
                while len(self._params) > self.capacity:
                    self._drop(min(self._params))
            else:
                self._keep_playable()
        return sid

    def _drop(self, sid: int) -> None:
        for table in (self._params, self._update, self._record, self._round):
            del table[sid]
        for counts in self._recent.values():
            counts.pop(sid, None)

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

    def _probabilities(self, ids: list[int] | None = None, records: Any = None) -> dict:
        """Each of `ids`' (default: every snapshot's) probability, PFSP's from `records`
        (`{id: [wins, draws, losses]}`, default the records now)."""
        ids = sorted(self._params) if ids is None else ids
        if not ids:
            return {}
        if self.sampling == "uniform":
            weights = np.ones(len(ids))
        elif self.sampling == "latest":
            weights = np.full(len(ids), 0.5 / len(ids))
            weights[-1] += 0.5
        else:
            records = self._record if records is None else records
            wins, draws, losses = np.stack([records[i] for i in ids]).T
            score = (wins + 0.5 * draws + 1.0) / (wins + draws + losses + 2.0)
            weights = (1.0 - score) ** self.pfsp_exponent
        return dict(zip(ids, (weights / weights.sum()).tolist(), strict=True))

    # --- lockstep mode ---------------------------------------------------------------------
    # What an actor draws in round u follows from the rounds before it alone: the newest
    # `capacity` snapshots drawn from round u or before, weighted by the games that ended in
    # rounds before u (every actor's are in: round u starts after every actor ended round
    # u - 1), with the actor's own generator. A replayed round draws as it first did, so the
    # rounds an actor may still replay are kept: every actor is within two rounds of the
    # newest round the pool saw (`sebulba/lane_reads.py` keeps the agents' learners a round
    # apart), so from the epoch of that round less two on.

    def reached(self, round_: int) -> None:
        """The pool's owner acts its round `round_` now: its snapshots drawn from it are in."""
        with self._lock:
            self._reached = max(self._reached, round_)
            self._changed.notify_all()

    def draw(self, round_: int, rng: np.random.Generator, stop: threading.Event) -> int:
        """A snapshot id for a game starting in round `round_`, drawn with `rng` once the
        owner reached the round (`ActingStopped` when `stop` is set first)."""
        with self._lock:
            while self._reached < round_:
                if stop.is_set():
                    raise ActingStopped
                self._changed.wait(POLL_S)
            ids = sorted(i for i in self._params if self._round[i] <= round_)[-self.capacity :]
            # None: rounds counted again from 0 by a resume that could not take back a
            # replay's rounds (`replay.save` off, logged as not exact): the oldest kept.
            ids = ids or [min(self._params)]
            records = {i: self._record[i].copy() for i in ids}
            for r, counts in self._recent.items():
                for i, c in counts.items():
                    if r < round_ and i in records:
                        records[i] += c
            probs = self._probabilities(ids, records)
            p = np.asarray(list(probs.values()))
            return int(rng.choice(list(probs), p=p / p.sum()))

    def record_at(self, sid: int, learner_return: float, round_: int) -> None:
        """`record` of a game that ended in round `round_`."""
        with self._lock:
            if sid in self._record:
                counts = self._recent.setdefault(round_, {}).setdefault(sid, np.zeros(3, np.int64))
                counts[0 if learner_return > 0 else 1 if learner_return == 0 else 2] += 1
                self._keep_playable()

    def _keep_playable(self) -> None:
        """Sums the records of rounds no actor plays again and drops the snapshots no round
        still played can draw: a snapshot is drawn from the first such round it may be, or
        never, if `capacity` newer ones may be drawn then too."""
        newest = max([*self._round.values(), *self._recent])
        floor = self._epoch * ((newest - 2) // self._epoch)
        for r in [r for r in self._recent if r < floor]:
            for i, c in self._recent.pop(r).items():
                self._record[i] += c
        ids = sorted(self._params)
        for k, sid in enumerate(ids):
            first = max(self._round[sid], floor)
            if sum(self._round[i] <= first for i in ids[k + 1 :]) >= self.capacity:
                self._drop(sid)

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

    def to_arrays(self, before_round: int | None = None) -> dict[str, np.ndarray]:
        """The whole pool as flat arrays (see the module docstring); in lockstep mode the
        records of the rounds before `before_round` (the owner's next round: the games of the
        rounds it acts again after a resume are recorded again)."""
        with self._lock:
            ids = sorted(self._params)
            recent = [
                (r, i, *c)
                for r, counts in sorted(self._recent.items())
                for i, c in sorted(counts.items())
                if before_round is None or r < before_round
            ]
            arrays = {
                "ids": np.array(ids, np.int64),
                "updates": np.array([self._update[i] for i in ids], np.int64),
                "rounds": np.array([self._round[i] for i in ids], np.int64),
                "records": np.array([self._record[i] for i in ids], np.int64).reshape(-1, 3),
                "recent_records": np.array(recent, np.int64).reshape(-1, 5),
                "reached": np.array(self._reached, np.int64),
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
            for table in (self._params, self._update, self._record, self._round, self._recent):
                table.clear()
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
            # Pools saved before lockstep mode took them: each snapshot drawn from its update.
            rounds = arrays.get("rounds", arrays["updates"])
            self._round = dict(zip(arrays["ids"].tolist(), rounds.tolist(), strict=True))
            for r, i, *counts in arrays.get("recent_records", np.zeros((0, 5))).tolist():
                self._recent.setdefault(r, {})[i] = np.array(counts, np.int64)
            self._reached = int(arrays.get("reached", max(self._round.values(), default=-1)))
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
      at: a lockstep actor's rounds: it draws with `OpponentPool.draw` (with `rng`) and records
        the games of the rounds it acts (not those it replays: they were recorded).
      rng: the lockstep draws' generator (the actor's own, made again each env epoch).
    """

    def __init__(
        self,
        pool: OpponentPool,
        policy: RowPolicy,
        to_device: Callable[[PyTree], PyTree] = lambda p: p,
        at: ActingRound | None = None,
        rng: np.random.Generator | None = None,
    ):
        self._pool, self._policy, self._to_device = pool, policy, to_device
        self._at, self._rng = at, rng
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
        if sid is None:
            return
        if self._at is None:
            self._pool.record(sid, -seat_return)  # zero-sum: the learner's result is the opposite
        elif not self._at.replaying():  # recorded once the actor's unroll is whole
            self._at.record(
                functools.partial(self._pool.record_at, sid, -seat_return, self._at.playing())
            )

    def _snapshot_for(self, game: int) -> int:
        if game not in self._playing:
            if self._at is None:
                self._playing[game] = self._pool.sample()
            else:
                self._playing[game] = self._pool.draw(self._at.playing(), self._rng, self._at.stop)
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
    """Plays a seat with another agent of the run (`agent:NAME`, `config.agents`), on this
    actor's device, a memory per game: with its newest published params from its params store,
    or, for a lockstep actor (`at`), with its params of the round the actor plays now (`rounds`,
    that agent's by round), so the moves follow from the seed alone."""

    def __init__(
        self,
        store: Any,
        device: jax.Device,
        policy: RowPolicy,
        rounds: RoundParams | None = None,
        at: ActingRound | None = None,
    ):
        super().__init__(policy)
        self._store, self._device, self._rounds, self._at = store, device, rounds, at
        self._round: tuple[int, PyTree] | None = None  # (round, its params on the device)

    def _params(self) -> PyTree:
        if self._rounds is None or self._at is None:
            return self._store.get(self._device)[0]
        now = self._at.playing()
        if self._round is None or self._round[0] != now:
            host = self._rounds.get(now, self._at.stop)
            self._round = (now, jax.device_put(host, self._device))
        return self._round[1]


def role_arrays(arrays: dict[str, np.ndarray], role: str) -> dict[str, np.ndarray]:
    """Pool `role`'s arrays (`OpponentPool.to_arrays`) out of `SeatPools.to_bytes`' decoded
    arrays, keyed "<role>/<key>"; empty if it holds none."""
    return keys_under(arrays, f"{role}/")
