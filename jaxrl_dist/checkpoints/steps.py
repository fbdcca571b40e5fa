"""Finding and reading a run's checkpoint steps (for `load_policy` and `scripts/evaluate.py`):
the checkpoint dir of a run, its complete steps, "latest" / "best" / a number, and reads that
retry while the run deletes old steps. "latest" is the newest intact step
(`integrity`): damaged newer ones are named in one warning line.

Errors are `FileNotFoundError` or `ValueError` with one line naming what is wrong and the fix.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

from jaxrl_dist.checkpoints.integrity import Damage, damaged_clause, newest_intact
from jaxrl_dist.checkpoints.store import (
    BEST_STORE,
    AgentNotSavedError,
    Checkpointer,
    best_dir,
    find_checkpoint_dir,
    first_line,
)

STEP_CHOICES = ("latest", "best")
READ_ATTEMPTS = 3  # reads of a step that fail while a run deletes other steps are retried
READ_RETRY_S = 0.2


class StepGoneError(FileNotFoundError):
    """A checkpoint step that was listed but deleted before it was read (a run's retention)."""


def checkpoint_dir(path: str) -> str:
    """The checkpoint directory of `path` (a run's work dir or its checkpoints dir)."""
    if not os.path.isdir(path):
        raise FileNotFoundError(f"{path!r} is not a directory; give a run's work dir")
    directory = find_checkpoint_dir(path)
    if directory is None:
        raise FileNotFoundError(
            f"no checkpoint under {path!r}; give a run's work dir (with checkpoints/<step>/) "
            "or its checkpoints dir"
        )
    return directory


def list_steps(directory: str) -> list[int]:
    """Complete steps in a checkpoint dir, ascending. Orbax writes a step to a temporary
    directory and renames it to its number when complete, so only digit names count."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(int(n) for n in names if n.isdigit())


def read_meta(directory: str, step: int) -> dict[str, Any]:
    """The meta of `step` in a checkpoint dir. Raises StepGoneError if the step is no longer
    there (deleted by the run's retention), ValueError if it cannot be read."""

    def read() -> dict[str, Any]:
        with Checkpointer(directory, create=False) as ckpt:
            return ckpt.restore_meta(step)

    return read_step(directory, step, "the meta", read)


def read_step(directory: str, step: int, what: str, read: Callable[[], Any]) -> Any:
    """`read()` of `step`, retried (`_retried`). Raises StepGoneError if the step itself is
    gone, ValueError if it stays unreadable."""
    step_dir = os.path.join(directory, str(step))

    def check_present() -> None:
        if not os.path.isdir(step_dir):
            raise StepGoneError(f"step {step} is no longer in {directory}")

    return _retried(read, f"{what} of step {step} in {directory}", check_present)


def _retried(read: Callable[[], Any], what: str, check: Callable[[], None] = lambda: None) -> Any:
    """`read()`, tried READ_ATTEMPTS times: Orbax opens a directory by reading every step's
    metadata, so a run deleting an old step meanwhile fails a read of another one once.
    `check()` runs before each try and after the last (it raises if retrying is pointless).
    Raises ValueError naming `what` if every try fails."""
    for attempt in range(READ_ATTEMPTS):
        check()
        try:
            return read()
        except Exception as e:  # noqa: BLE001  Orbax raises many kinds here
            error = e
        if attempt + 1 < READ_ATTEMPTS:
            time.sleep(READ_RETRY_S)
    check()
    raise ValueError(f"{what} cannot be read ({first_line(error)}); choose another --step")


def split_step(spec: str) -> tuple[str, str]:
    """`RUN[@latest|@best|@STEP]` -> (RUN, which step; "latest" when none is named). Only
    those three forms after the last `@` name a step: any other `@` belongs to the path."""
    path, at, which = spec.rpartition("@")
    if at and path and (which in ("latest", "best") or which.isdigit()):
        return path, which
    return spec, "latest"


def resolve_step(path: str, which: str | int = "latest") -> int:
    """The checkpoint step `which` ("latest" or a step number, int or digits) names in the run
    at `path`. "best" is in a directory of its own: `locate_step`."""
    if which == "best":
        raise ValueError("the best params are in checkpoints/best/: use locate_step")
    return locate_step(path, which)[1]


def locate_step(
    path: str,
    which: str | int = "latest",
    agent: str | None = None,
    warn: Callable[[str], None] | None = None,
) -> tuple[str, int]:
    """(the checkpoint dir to read, the step) that `which` names in the run at `path`.

    `which`: "latest", the newest intact step (newer damaged ones are named in one line to
    `warn`, by default a `warning:` line on stderr); a step number (int or digits); or "best":
    the params of the run's best
    evaluation, which the run wrote to `checkpoints/best/` (agent `agent`'s best, in
    `best/NAME/`, for a run of several agents), `best.py`. Runs saved before that directory
    existed, with `keep_best_checkpoints`, kept their best among their checkpoints: their step
    of highest metric. Errors name the fix (FileNotFoundError, ValueError; one line).
    """
    directory = checkpoint_dir(path)
    steps = list_steps(directory)
    if not steps:  # every step deleted since checkpoint_dir looked
        raise FileNotFoundError(f"no checkpoint under {path!r} any more")
    if isinstance(which, str) and which.isdigit():
        which = int(which)
    if which == "latest":
        return directory, _latest_intact(path, directory, steps, warn or _warn)
    if which == "best":
        return _best(path, directory, _latest_intact(path, directory, steps, None), agent)
    if isinstance(which, int) and not isinstance(which, bool):
        if which not in steps:
            raise ValueError(
                f"step {which} is not a checkpoint of {path!r}; available: "
                f"{', '.join(map(str, steps))} (or latest, best)"
            )
        return directory, which
    raise ValueError(f"step {which!r}: give latest, best or a step number")


def _latest_intact(
    path: str, directory: str, steps: list[int], warn: Callable[[str], None] | None
) -> int:
    """The newest step of `steps` that is whole; `warn` (if given) gets one line naming the
    damaged newer ones. ValueError (one line) if none is whole."""
    step, damaged = newest_intact(directory, steps)
    if step is None:
        raise ValueError(
            f"no intact checkpoint under {path!r}: {'; '.join(d.clause for d in damaged)}"
        )
    if damaged and warn is not None:
        warn(damage_note(f"{path}@latest", step, damaged))
    return step


def damage_note(source: str, step: int, damaged: list[Damage]) -> str:
    """One line: `source`'s damaged newer steps, and the step used instead."""
    return (
        f"{source}: checkpoint {damaged_clause(damaged)}; using step {step}, the newest intact one"
    )


def _warn(line: str) -> None:
    print(f"warning: {line}", file=sys.stderr)


def _best(path: str, directory: str, latest: int, agent: str | None) -> tuple[str, int]:
    """Where the best params of the run are (`locate_step`)."""
    meta = read_meta(directory, latest)
    names = list(meta.get("policies") or {})
    if names and agent not in names:
        given = f"has no agent {agent!r}" if agent else "holds several agents"
        raise AgentNotSavedError(
            f"{path!r} {given} ({', '.join(names)}); each has its own best: name one "
            "(--agent NAME, agent=NAME)"
        )
    keep = meta.get("config", {}).get("keep_best_checkpoints", 0)
    if BEST_STORE not in meta and keep:  # saved before best/ existed: among the checkpoints
        return directory, _best_step(path, directory)
    best = best_dir(directory, agent if names else None)
    step = _top_step(best) if list_steps(best) else None
    if step is not None:
        return best, step
    if not meta.get(BEST_STORE, 0):
        raise ValueError(
            f"{path!r} saved no best params (config.keep_best_checkpoints=0); use --step latest "
            "or a step number, or train with config.keep_best_checkpoints=1"
        )
    raise ValueError(
        f"{path!r} has no best params yet: no evaluation has finished; use --step latest"
    )


def _top_step(directory: str) -> int | None:
    def best() -> int | None:
        with Checkpointer(directory, create=False) as ckpt:
            return ckpt.best_step()

    return _retried(best, f"the best params' metrics in {directory}")


def _best_step(path: str, directory: str) -> int:
    """Orbax ranks the steps by the metric it keeps beside each (ties go to the earlier step)."""
    step = _top_step(directory)
    if step is None:
        raise ValueError(
            f"no checkpoint of {path!r} records an evaluation (an eval_metric); train with "
            "evaluation on (config.eval_every_updates=N) or use --step latest"
        )
    return step
