"""The params each evaluation scored, kept where they beat that policy's best so far.

What a run reports is what it saved. When an evaluation is the best so far, process 0 keeps the
params it played (the snapshot an evaluation beside training took, not the params when its
result landed updates later) and writes them with the run's next checkpoint save, as a step
numbered by the snapshot's own update, into `checkpoints/best/` (a one-agent run) or
`checkpoints/best/NAME/` (each agent of several, ranked by its own metric:
`EvalMonitor.policy_metrics`). `--step best`, `RUN@best` and `load_policy(run, "best")` read
there (`checkpoints.steps.locate_step`); a run with best saves off
(`config.keep_best_checkpoints=0`) has no best, and they say so.

Writing with the saves costs the learner no pause of its own (a write measured 25-110 ms on 2
busy cores, and early in a run most evaluations are new bests), and keeps `best/` consistent
with every checkpoint: it holds the bests of the evaluations that landed by the latest save.
Each new best beats all before it, so the newest `keep_best_checkpoints` of a policy are its
top ones: no more than those wait in memory.

A best step holds what a checkpoint's policy part holds, the same tree and meta keys (`{"params":
...}` or `{"agents": {NAME: {"params": ...}}}` with every agent's params of the snapshot;
`policy` or `policies`; `config`), plus where the snapshot was taken and the evaluation that
scored it (`eval`); nothing a resume needs. Orbax keeps the `keep_best_checkpoints` steps of
highest metric in each directory. A resume deletes the best steps of evaluations that landed
after the step it resumes from (the history it discards), so the kept bests always belong to
the run's own history.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from typing import Any

import jax

from jaxrl_dist.checkpoints.store import METRIC, Checkpointer, best_dir
from jaxrl_dist.run.layout import Layout


class BestPolicies:
    """Process 0's writer of the best params of each policy of a run (one, or one per agent)."""

    def __init__(
        self,
        ckpt_dir: str,
        keep: int,
        policy_meta: dict[str, Any],
        names: list[str],
        policy_of: Callable[[Any], Any],
    ):
        """`policy_meta`: `{"policy": ...}` (one agent) or `{"policies": {NAME: ...}}` and
        `{"config": ...}`, as a checkpoint's meta holds them; `names`: the agents (one name: a
        one-agent run, whose bests are in `best/` itself); `policy_of(snapshot)`: the policy
        params (`Engine.policy_params`'s form) of an `Engine.eval_params` snapshot."""
        self._layout = layout = Layout(names)  # where each agent's bests go, and how
        self._meta, self._policy_of = policy_meta, policy_of
        self._stores = {
            name: Checkpointer(
                best_dir(ckpt_dir, layout.named(name)),
                keep_latest=0,
                keep_best=keep,
                primary_only=True,
            )
            for name in names
        }
        self._best = {name: _top(store) for name, store in self._stores.items()}
        # The newest bests not written yet (each beats those before it: the top `keep`).
        self._pending = {name: collections.deque(maxlen=keep) for name in names}
        # What writing them cost the learner's thread (the summary's `best_saves`): how many
        # were written, and the seconds `flush` held the thread (Orbax finishes in the back).
        self.written, self.write_s = 0, 0.0

    def resume(self, up_to_update: int) -> None:
        """Deletes the bests of evaluations that landed after update `up_to_update` (the resumed
        checkpoint's): the resumed run discards them from its history and may evaluate those
        snapshots again."""
        for name, store in self._stores.items():
            for step in store.all_steps():
                meta = store.restore_meta(step)
                if meta.get("landed_at_updates", step) > up_to_update:
                    store.delete(step)
            self._best[name] = _top(store)

    def offer(
        self,
        metrics: dict[str, float],
        snapshot: Any,
        entry: dict[str, Any],
        landed_at_updates: int,
    ) -> list[str]:
        """Keeps `snapshot` (an `eval_params` snapshot, evaluated as `entry` says) as the best
        of each policy whose metric in `metrics` (by agent name) beats its best so far (a tie
        does not), to be written by `flush`. Returns those names."""
        better = [n for n, m in metrics.items() if self._best[n] is None or m > self._best[n]]
        point = {k: entry[k] for k in ("env_steps", "updates", "wall_time_s")}
        for name in better:
            meta = {
                **self._meta,
                **point,
                "landed_at_updates": landed_at_updates,
                "eval": entry,
                **({"best_of": name} if self._layout.named(name) else {}),
            }
            self._pending[name].append((snapshot, meta, metrics[name]))
            self._best[name] = metrics[name]
        return better

    def flush(self) -> None:
        """Writes the bests kept since the last flush (with every checkpoint save)."""
        start = time.perf_counter()
        for name, pending in self._pending.items():
            while pending:
                snapshot, meta, metric = pending.popleft()
                params = self._layout.params_of(jax.device_get(self._policy_of(snapshot)))
                state = self._layout.tree({n: {"params": p} for n, p in params.items()})
                self._save(self._stores[name], meta["updates"], state, meta, metric)
                self.written += 1
        self.write_s += time.perf_counter() - start

    @staticmethod
    def _save(store: Checkpointer, step: int, state: Any, meta: dict, metric: float) -> None:
        if step in store.all_steps():  # only after a failed resume's pruning; never two bests
            store.wait()
            store.delete(step)
        store.save(step, state, {**meta, METRIC: metric}, metric=metric)

    def steps(self) -> dict[str, int | None]:
        """Each policy's best step on disk (None: none written yet)."""
        self.wait()
        return {name: store.best_step() for name, store in self._stores.items()}

    def wait(self) -> None:
        for store in self._stores.values():
            store.wait()

    def close(self) -> None:
        for store in self._stores.values():
            store.close()


def _top(store: Checkpointer) -> float | None:
    """The highest metric among a store's steps (None if it has none)."""
    step = store.best_step()
    return None if step is None else store.metric(step)
