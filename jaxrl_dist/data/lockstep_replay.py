"""Deterministic mode's replay on Sebulba: the data depend only on the seed, not on thread timing.

Lockstep actors (`acting/lockstep.py`) act in rounds: round `r` is one unroll of every actor.
A replay in lockstep mode inserts a round only when every actor's unroll of it came, all of
them in actor order and past the rate limiter (the rounds pace the actors, not the limiter);
between two rounds the learner samples exactly as long as the limiter lets it (so the samples,
the replay's RNG draws and the priorities they write back follow from the rounds alone), and
when it cannot sample any more, the params version it reached is the one round `r + 1` is acted
with (`version_for`). An actor waiting for that version waits for the learner, as an on-policy
lockstep actor waits for the next update; a round's version repeats while the replay fills to
`min_size`.

The replay's snapshot (what a checkpoint keeps, `config.replay.save`) holds the rounds inserted,
the env actions of the current env epoch's rounds (`[n, T, B_process, ...]`, columns by actor
then env, as `sebulba/resume.py`'s `ReplayLog` for on-policy runs) and the recurrent states the
last round ended with: a resumed run's actors replay those actions without inference and go on
from the next round exactly.
"""

from __future__ import annotations

import collections
import threading
from typing import Any

import jax
import numpy as np

from jaxrl_dist.data.base import NOT_READY, Batch, Liveness, NotReady, QueueItem
from jaxrl_dist.data.snapshot import tree_arrays, tree_from_arrays
from jaxrl_dist.threads import POLL_S

ROUNDS = "lockstep/rounds"
ENV_ACTIONS = "lockstep/env_actions"
MEMORY = "lockstep/memory/"


class LockstepReplay:
    """A host replay (`UniformReplay` or a subclass) fed in rounds (see the module docstring).

    Args:
      replay: the replay it feeds; its other methods (priorities, run-time settings, `size`)
        are its own.
      actors: the global indices of this process's actors, in order.
      items_per_unroll: the `QueueItem`s one actor writes per unroll.
      epoch_updates: rounds per env epoch (`config.sebulba.env_epoch_updates`).
      stop: set when the run stops; ends every wait.
      dead_timeout_s: a read raises RunError when no round came for this long.
    """

    def __init__(
        self,
        replay: Any,
        *,
        actors: range,
        items_per_unroll: int,
        epoch_updates: int,
        stop: threading.Event,
        read_stop: threading.Event | None = None,
        dead_timeout_s: float = 120.0,
    ):
        self._replay = replay
        self._pending = {g: collections.deque() for g in actors}
        self._per_unroll, self._epoch = items_per_unroll, epoch_updates
        self._stop, self._read_stop = stop, read_stop or stop
        self._dead_timeout_s = dead_timeout_s
        self._cond = threading.Condition()
        self.rounds = 0  # rounds inserted
        self._versions: dict[int, int] = {}  # round -> the params version it is acted with
        self._epoch_actions: list[np.ndarray] = []  # this epoch's rounds, `[T, B_process, ...]`
        self.memory: Any = {}  # every stream's recurrent state after the last round
        self.check_actors = lambda: None
        # on_round(round, version): round `round` is acted with params `version` (called once
        # per round, from the learner's read; several agents record their params of it).
        self.on_round: Any = None

    def __getattr__(self, name: str) -> Any:  # the replay's own methods and properties
        return getattr(self._replay, name)

    # ------------------------------------------------------------------ the actors' side
    def write(self, item: QueueItem) -> float:
        """Keeps `item` until its round is whole, then inserts the round in actor order."""
        with self._cond:
            self._pending[item.actor_index].append(item)
            while all(len(q) >= self._per_unroll for q in self._pending.values()):
                self._insert_round()
        return 0.0

    def _insert_round(self) -> None:
        """Under the lock: the next round, every actor's items in actor order."""
        firsts = []
        for g in sorted(self._pending):
            items = [self._pending[g].popleft() for _ in range(self._per_unroll)]
            firsts.append(items[0])  # a lockstep unroll's env actions come with its first item
            for item in items:
                self._replay.write(item, limited=False)
        if self.rounds % self._epoch == 0:
            self._epoch_actions = []
        self._epoch_actions.append(np.concatenate([i.env_actions for i in firsts], axis=1))
        memories = [i.memory for i in firsts]
        self.memory = jax.tree.map(lambda *rows: np.concatenate(rows), *memories)
        self.rounds += 1
        self._cond.notify_all()

    def version_for(self, unroll: int) -> int | None:
        """The params version an actor's unroll `unroll` (its round) is acted with, once the
        learner has sampled all it may before it; None at a stop."""
        with self._cond:
            while unroll not in self._versions:
                if self._stop.is_set():
                    return None
                self._cond.wait(POLL_S)
            return self._versions[unroll]

    @property
    def learned_rounds(self) -> int:
        """The rounds the learner is done with: it sampled all the limiter let it after them
        (so the next round's version is known)."""
        with self._cond:
            return self.rounds if self.rounds in self._versions else self.rounds - 1

    # ------------------------------------------------------------------ the learner's side
    def read(self, updates: int, wait: bool = True) -> Batch | NotReady | None:
        """The next sample the limiter allows now; when it allows none, round `rounds` is acted
        with version `updates` and the read waits for it (`NOT_READY` without `wait`)."""
        alive = Liveness(self._dead_timeout_s, "round inserted", self.rounds)
        while True:
            with self._cond:
                if self._stop.is_set() or self._read_stop.is_set():
                    return None
                batch = self._replay.read(updates, wait=False)
                if batch is not NOT_READY:
                    return batch
                if self.rounds not in self._versions:
                    self._versions = {self.rounds: updates}  # the older rounds are acted
                    if self.on_round is not None:
                        self.on_round(self.rounds, updates)
                    self._cond.notify_all()
                if not wait:
                    return NOT_READY
                self._cond.wait(POLL_S)
                rounds = self.rounds
            self.check_actors()  # outside the lock: it may restart actors that write
            alive.check(rounds)

    # ------------------------------------------------------------------ checkpoints
    def snapshot(self) -> dict[str, np.ndarray]:
        """The replay's snapshot with the rounds inserted, this epoch's env actions and the
        recurrent states after the last round; one consistent moment (no round goes in)."""
        with self._cond:
            arrays = self._replay.snapshot()
            arrays[ROUNDS] = np.array(self.rounds, np.int64)
            if self._epoch_actions:
                arrays[ENV_ACTIONS] = np.stack(self._epoch_actions)
            arrays.update(tree_arrays(self.memory, MEMORY))
            return arrays

    def restore(self, arrays: dict[str, np.ndarray]) -> None:
        with self._cond:
            self._replay.restore(arrays)
            self.rounds = int(arrays.get(ROUNDS, 0))
            saved = arrays.get(ENV_ACTIONS)
            self._epoch_actions = [] if saved is None else list(saved)
            self.memory = tree_from_arrays(arrays, MEMORY)

    def epoch_replay(self) -> tuple[int, dict[str, Any] | None]:
        """After a restore: (the round the actors go on from, what they replay first: this
        process's `{"env_actions": [n, T, B_process, ...], "memory": [B_process, ...]}`, its
        columns by actor then stream, as `sebulba/resume.py`'s `replay_for_actors` splits them;
        None at an epoch's start or with nothing restored)."""
        if not self._epoch_actions or self.rounds % self._epoch == 0:
            return self.rounds, None
        return self.rounds, {"env_actions": np.stack(self._epoch_actions), "memory": self.memory}
