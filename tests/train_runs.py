"""Test helper: one `scripts/train.py` run in a subprocess, as a user starts it."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def jsonl_records(workdir: str, name: str) -> list[dict]:
    """Every line of a run's JSONL file (`metrics.jsonl`, `evals.jsonl`) as a dict."""
    with open(os.path.join(workdir, name)) as f:
        return [json.loads(line) for line in f]


# `impala_cartpole.py:quick` on Anakin: 30 updates of 8 envs x 20 steps, its Sebulba fields at
# their defaults (as the refusal says: Anakin would not use them).
IMPALA_ON_ANAKIN = {
    "runtime": "anakin",
    "batch_size": 8,
    "unroll_length": 20,
    "total_env_steps": 8 * 20 * 30,
    "sebulba.envs_per_actor": 16,
    "sebulba.env_threads_per_actor": 0,
}


def train_run(config: str, workdir: str, *flags: str, env: dict | None = None) -> dict:
    """Runs `scripts/train.py --config CONFIG --workdir WORKDIR FLAGS...` from the checkout
    (with `env` over this process's environment); returns its `summary.json` (the test fails
    with the run's stderr if it exits non-zero)."""
    out = subprocess.run(
        [
            sys.executable,
            os.path.join(ROOT, "scripts", "train.py"),
            "--config",
            config,
            "--workdir",
            workdir,
            *flags,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    with open(os.path.join(workdir, "summary.json")) as f:
        return json.load(f)


def train_main(config: str, workdir: str, *flags: str) -> dict:
    """`scripts/train.py --config CONFIG --workdir WORKDIR --quiet FLAGS...` in this process
    (the script's `main`: its parsing, checks, files and exit code, without a cold process's
    imports); returns its `summary.json`."""
    from jaxrl_dist.tools.train_cli import main

    config = config if os.path.isabs(config) else os.path.join(ROOT, config)
    code = main(["--config", config, "--workdir", workdir, "--quiet", *flags])
    assert code == 0, f"scripts/train.py's main exited {code}"
    with open(os.path.join(workdir, "summary.json")) as f:
        return json.load(f)


def interrupted_run(config, workdir: str, stop_at_env_steps: int):
    """An in-process run of `config` in `workdir`, asked to stop ("interrupted for the test")
    by the first `on_iteration` (between steps) at or after `stop_at_env_steps`; its
    `RunResult`. The runtime is imported here: `train_run` users need no JAX in the parent."""
    from jaxrl_dist.run.hooks import Hooks
    from jaxrl_dist.run.trainer import Trainer

    holder = []

    def stop(episodes: int, env_steps: int) -> None:
        if env_steps >= stop_at_env_steps:
            holder[0].request_stop("interrupted for the test")

    trainer = Trainer(config, workdir, quiet=True, hooks=Hooks(on_iteration=stop))
    holder.append(trainer)
    return trainer.run()
