"""Run N training processes on this machine, joined by `jax.distributed` (CPU: gloo collectives).

    python scripts/launch_local.py --num_processes 2 --devices_per_process 2 \
        --config configs/impala_cartpole.py --workdir runs/cp_2proc

Every argument it does not know goes to `scripts/train.py`. See `jaxrl_dist/tools/launch.py`.
"""

import argparse
import sys

from jaxrl_dist.tools.launch import run

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num_processes", type=int, default=2)
    parser.add_argument(
        "--devices_per_process",
        type=int,
        default=0,
        help="fake CPU devices per process (0: each process sees the machine's own devices)",
    )
    args, train_args = parser.parse_known_args()
    if args.num_processes < 1 or args.devices_per_process < 0:
        print("error: --num_processes must be >= 1 and --devices_per_process >= 0", file=sys.stderr)
        sys.exit(2)
    sys.exit(run(train_args, args.num_processes, args.devices_per_process))
