"""What an Anakin run reports: the log window (every seed's episodes and each seed's), each
seed's summary, and the digest of the whole carry."""

from __future__ import annotations

import time

import jax
import numpy as np

from jaxrl_dist.anakin.program import Carry, each_carry
from jaxrl_dist.checkpoints.store import tree_digest
from jaxrl_dist.config import TrainConfig
from jaxrl_dist.run.counters import Counters


def carry_digest(carry: Carry | tuple[Carry, ...]) -> str:
    """The whole carry's (or several agents' carries') digest, the same on every process:
    per-env arrays that span processes are gathered whole first (a collective: every process
    calls this)."""
    if jax.process_count() == 1:
        return tree_digest(carry)
    from jax.experimental import multihost_utils

    gather = lambda c: multihost_utils.process_allgather(c.acting, tiled=True)  # noqa: E731
    return tree_digest(each_carry(lambda c: c._replace(acting=gather(c)), carry))


def per_seed(evals: list[dict], config: TrainConfig, prefix: str = "") -> list[dict]:
    """Each seed's best and final evaluation return, and when it first reached the target
    (`prefix`: an agent's keys, `NAME/`, of a run of several)."""
    out = []
    for i in range(config.anakin.num_seeds):
        key = prefix + (f"seed{i}_return" if config.anakin.num_seeds > 1 else "return")
        curve = [(e["env_steps"], e[key]) for e in evals if key in e]
        target = config.stop_at_eval_return
        reached = [s for s, r in curve if target is not None and r >= target]
        out.append(
            {
                "seed": config.seed + i,
                "final_eval_return": curve[-1][1] if curve else None,
                "best_eval_return": max(r for _, r in curve) if curve else None,
                "env_steps_to_target": reached[0] if reached else None,
            }
        )
    return out


class LogWindow:
    """Episodes and speed between two log lines (every seed's episodes, and each seed's)."""

    def __init__(self, env_steps: int):
        self._time, self._steps = time.monotonic(), env_steps
        self._episodes = self._returns = self._lengths = 0.0

    def add(self, totals) -> None:
        self._episodes = self._episodes + np.asarray(totals.episodes, np.float64)
        self._returns = self._returns + np.asarray(totals.return_sum, np.float64)
        self._lengths = self._lengths + np.asarray(totals.length_sum, np.float64)

    def record(self, metrics: dict[str, float], counters: Counters) -> dict[str, float]:
        now = time.monotonic()
        record = {f"losses/{k}": v for k, v in metrics.items()}
        record["charts/sps"] = (counters.env_steps - self._steps) / max(now - self._time, 1e-9)
        record["charts/updates"] = counters.updates
        episodes = np.atleast_1d(self._episodes)
        record["charts/episodes"] = float(episodes.sum())
        if episodes.sum():
            record["charts/episode_return"] = float(np.sum(self._returns) / episodes.sum())
            record["charts/episode_length"] = float(np.sum(self._lengths) / episodes.sum())
        if episodes.size > 1:
            returns = np.atleast_1d(self._returns)
            for i, (n, r) in enumerate(zip(episodes, returns, strict=True)):
                if n:
                    record[f"charts/seed{i}_episode_return"] = float(r / n)
        self.__init__(counters.env_steps)
        return record
