"""Plot learning curves: `python scripts/plot.py runs/cp [runs/cp2 ...] [--out curves.png]`.

Options: `--labels a,b` (one per run, default: each run directory's name), `--title T` (default:
the runs' env_id and algorithm from config.json), `--x env_steps|wall_time_s`.
Output: `--out FILE.png`; without it, one run is drawn into `<run>/learning_curve.png` and
several runs into `learning_curves.png` in the current directory. The path is printed.
Bad input (a directory without metrics.jsonl, a label count that does not match the runs) prints
one `error:` line and exits with status 2, writing nothing. See
`jaxrl_dist/tools/plotting.py` (and `jaxrl_dist/run/curves.py`, which draws).
"""

import sys

from jaxrl_dist.tools.plotting import main

if __name__ == "__main__":
    sys.exit(main())
