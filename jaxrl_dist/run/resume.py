"""Resume checks before a run writes anything: the latest checkpoint is complete, readable and
of this config's shapes (`check_resumable`); the engines restore their state themselves."""

from __future__ import annotations

import os
from typing import Any

from jaxrl_dist.config import ConfigError
from jaxrl_dist.run.checkpoint import CheckpointReadError, state_mismatch


def check_resumable(ckpt_dir: str, abstract_state: Any) -> None:
    """Raises ConfigError (one line, nothing written) if the latest checkpoint in `ckpt_dir`
    cannot be read, or holds a state of other shapes than this config's."""
    names = os.listdir(ckpt_dir) if os.path.isdir(ckpt_dir) else []
    steps = sorted(int(n) for n in names if n.isdigit())
    if not steps:
        partial = f" (only incomplete saves: {', '.join(sorted(names))})" if names else ""
        raise ConfigError(
            f"--resume: no complete checkpoint in {ckpt_dir}{partial}; drop --resume and start "
            "anew in another --workdir"
        )
    try:
        problem = state_mismatch(ckpt_dir, abstract_state, steps[-1])
    except CheckpointReadError as e:
        fallback = (
            f"delete {os.path.join(ckpt_dir, str(steps[-1]))} to resume from step {steps[-2]}"
            if len(steps) > 1
            else "no earlier step to fall back to: start anew in another --workdir"
        )
        raise ConfigError(f"--resume: checkpoint {e}; {fallback}") from None
    if problem:
        raise ConfigError(
            f"--resume: the checkpoint in {ckpt_dir} does not fit this config ({problem}); "
            "resume with the run's own config (its config.json), or start anew in another "
            "--workdir (nothing was overwritten)"
        )
