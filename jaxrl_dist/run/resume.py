"""Which checkpoint step `--resume` goes on from, decided before the run writes anything.

`check_resumable` (every process, before anything is written) finds the newest step intact on
this process (`checkpoints.integrity`: every item read as the run will read it) and refuses in
one line when there is none, or when it holds other shapes than this config's. `settle` (every
process together, as the session opens) agrees on the newest step intact on all of them, and
process 0 moves the damaged newer steps and half-written saves aside, to
`checkpoints/damaged/<step>-<kind>`: kept for a look (never deleted), out of Orbax's sight, and
out of the way of the run's own saves at those step numbers. The engine then restores the
latest step, which is the agreed one.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
from typing import Any

import numpy as np

from jaxrl_dist.checkpoints.integrity import (
    KINDS,
    Damage,
    StateMismatch,
    StepReader,
    damaged_clause,
    half_written,
    newest_intact,
)
from jaxrl_dist.checkpoints.store import complete_steps
from jaxrl_dist.config import ConfigError
from jaxrl_dist.learning.distributed import Cluster

DAMAGED_DIR = "damaged"  # checkpoints/damaged/<step>-<kind>: damaged steps moved aside
MAX_LISTED = 64  # the newest steps processes compare (a run keeps a few)


@dataclasses.dataclass
class ResumePlan:
    """The step a resume starts from and the damage of the newer ones.

    Attributes:
      ckpt_dir: the run's checkpoint directory.
      step: the newest intact step (on this process; after `settle`, on every process).
      damaged: the newer steps' damage, newest first (half-written saves among them).
      moved: process 0, after `settle`: where each damaged directory went.
    """

    ckpt_dir: str
    step: int
    damaged: list[Damage]
    abstract_state: Any = None
    moved: list[str] = dataclasses.field(default_factory=list)
    _verdicts: dict[int, Damage | None] = dataclasses.field(default_factory=dict)

    def verdict(self, step: int) -> Damage | None:
        """This process's verdict on `step` (read once, as the run will read it)."""
        known = {d.step: d for d in self.damaged if d.kind != "half-written"}
        if step == self.step or step in known:
            return known.get(step)
        if step not in self._verdicts:
            with StepReader() as reader:
                try:
                    self._verdicts[step] = reader.damage(
                        self.ckpt_dir, step, deep=True, abstract_state=self.abstract_state
                    )
                except FileNotFoundError:
                    self._verdicts[step] = Damage(step, "missing", "its directory is missing")
                except StateMismatch as e:  # the same on every process: all refuse
                    raise _mismatch(self.ckpt_dir, e) from None
        return self._verdicts[step]

    def note(self) -> str | None:
        """The one line that names the damaged steps and the step resumed (None: no damage)."""
        if not self.damaged:
            return None
        what = damaged_clause(self.damaged)
        where = f"; moved aside to {', '.join(self.moved)}" if self.moved else ""
        return (
            f"--resume: checkpoint {what}; resuming from step {self.step}, the newest intact "
            f"one{where}"
        )

    def record(self) -> dict[str, Any] | None:
        """The summary's `checkpoint_fallback` (None: the latest step was intact)."""
        if not self.damaged:
            return None
        damaged = [dataclasses.asdict(d) for d in self.damaged]
        return {"resumed_step": self.step, "damaged": damaged, "moved_to": self.moved}


def check_resumable(ckpt_dir: str, abstract_state: Any) -> ResumePlan:
    """The newest step in `ckpt_dir` intact on this process, and the newer ones' damage.
    Raises ConfigError (one line, nothing written) if no step is intact, or the newest whole
    one holds a state of other shapes than `abstract_state`."""
    names = os.listdir(ckpt_dir) if os.path.isdir(ckpt_dir) else []
    steps = complete_steps(ckpt_dir)
    if not steps and not half_written(ckpt_dir):
        partial = f" (only {', '.join(sorted(names))})" if names else ""
        raise ConfigError(
            f"--resume: no complete checkpoint in {ckpt_dir}{partial}; drop --resume and start "
            "anew in another --workdir"
        )
    try:
        step, damaged = newest_intact(ckpt_dir, steps, deep=True, abstract_state=abstract_state)
    except StateMismatch as e:
        raise _mismatch(ckpt_dir, e) from None
    damaged = _newest_first(damaged + _cut_short(ckpt_dir, -1 if step is None else step))
    if step is None:
        clauses = "; ".join(d.clause for d in damaged)
        raise ConfigError(
            f"--resume: no intact checkpoint in {ckpt_dir} ({clauses}); nothing was changed: "
            "start anew in another --workdir"
        )
    return ResumePlan(ckpt_dir, step, damaged, abstract_state)


def settle(plan: ResumePlan, cluster: Cluster) -> ResumePlan:
    """Every process together: the newest step intact on all of them (`agree`); process 0
    then moves the damaged newer steps aside, and the others wait for it. ConfigError (on every
    process) if no step is intact on all."""
    if cluster.count > 1:
        plan = agree(plan, cluster)
    if cluster.is_primary and plan.damaged:
        plan.moved = move_aside(plan)
    if cluster.count > 1:
        cluster.gather(np.zeros((), np.int32))  # nobody opens the directory mid-move
    return plan


def agree(plan: ResumePlan, cluster: Cluster) -> ResumePlan:
    """The newest of process 0's steps that every process finds intact, each process reading
    the steps it has not yet read (all in step, one gather a step)."""
    listed = np.full(MAX_LISTED, -1, np.int64)
    newest = complete_steps(plan.ckpt_dir)[::-1][:MAX_LISTED]
    listed[: len(newest)] = newest
    damaged = []
    for step in (int(s) for s in cluster.gather(listed)[0] if s >= 0):
        mine = plan.verdict(step)
        code = 0 if mine is None else KINDS.index(mine.kind) + 1
        codes = cluster.gather(np.int32(code))
        if not codes.any():
            damaged = _newest_first(damaged + _cut_short(plan.ckpt_dir, step))
            return dataclasses.replace(plan, step=step, damaged=damaged)
        first = int(np.flatnonzero(codes)[0])  # process 0's reason if it has one
        kind = KINDS[codes[first] - 1]
        if first != cluster.index:
            damaged.append(Damage(step, kind, f"{kind} on process {first}: see its warning"))
            continue
        damaged.append(mine)
        if first:  # process 0 cannot say why: this process does
            print(f"warning: --resume: process {first}: {mine.clause}", file=sys.stderr)
    clauses = "; ".join(d.clause for d in damaged) or "none is listed"
    raise ConfigError(
        f"--resume: no checkpoint in {plan.ckpt_dir} is intact on every process ({clauses}); "
        "nothing was changed: start anew in another --workdir"
    )


def _mismatch(ckpt_dir: str, problem: StateMismatch) -> ConfigError:
    return ConfigError(
        f"--resume: the checkpoint in {ckpt_dir} does not fit this config ({problem}); "
        "resume with the run's own config (its config.json), or start anew in another "
        "--workdir (nothing was overwritten)"
    )


def _cut_short(ckpt_dir: str, newest: int) -> list[Damage]:
    """The saves of steps after `newest` that were cut short (Orbax's temporary directories)."""
    return [
        Damage(s, "half-written", "a save cut short") for s in half_written(ckpt_dir) if s > newest
    ]


def _newest_first(damaged: list[Damage]) -> list[Damage]:
    return sorted(damaged, key=lambda d: (-d.step, d.kind))


def move_aside(plan: ResumePlan) -> list[str]:
    """Moves each damaged step's directory (and each half-written save of a step newer than
    the one resumed) to `damaged/<step>-<kind>` (`-2`, `-3`, ... if taken); the paths."""
    aside = os.path.join(plan.ckpt_dir, DAMAGED_DIR)
    half = half_written(plan.ckpt_dir)
    moved = []
    for damage in plan.damaged:
        names = half.get(damage.step, []) if damage.kind == "half-written" else [str(damage.step)]
        for name in names:
            source = os.path.join(plan.ckpt_dir, name)
            if not os.path.isdir(source):
                continue
            os.makedirs(aside, exist_ok=True)
            target = _free_name(os.path.join(aside, f"{damage.step}-{damage.kind}"))
            shutil.move(source, target)
            moved.append(target)
    return moved


def _free_name(path: str) -> str:
    candidate, n = path, 1
    while os.path.exists(candidate):
        n += 1
        candidate = f"{path}-{n}"
    return candidate
