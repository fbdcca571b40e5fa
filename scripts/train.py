"""Train an agent: `python scripts/train.py --config configs/impala_cartpole.py --workdir runs/cp`.

Overrides: `--config.field=value` (e.g. `--config.algo.learning_rate=3e-4`); `--resume` continues
the run in `--workdir`. See `jaxrl_dist/tools/train_cli.py` (the flags: `jaxrl_dist/config/cli.py`).
"""

import sys

from jaxrl_dist.tools.train_cli import main

if __name__ == "__main__":
    sys.exit(main())
