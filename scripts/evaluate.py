"""Evaluate a run's checkpoint: `python scripts/evaluate.py runs/cp --step best --episodes 10`.

`--video x.gif` records an episode; `--follow` evaluates each new checkpoint while the run trains
(into RUN_DIR/validation.jsonl). See `jaxrl_dist/tools/evaluate_cli.py`.
"""

import os
import sys

# Next to a training run on the same GPU: take memory as needed, not JAX's default 75% up front.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

from jaxrl_dist.tools.evaluate_cli import main  # noqa: E402  after the environment is set

if __name__ == "__main__":
    sys.exit(main())
