"""A finished CartPole run and the helpers that change copies of it, for the tests of
`load_policy`, `jaxrl_dist.evaluate` and `scripts/evaluate.py` (`test_evaluate.py`,
`test_evaluate_follow.py`)."""

import json
import os
import shutil

import jax

from jaxrl_dist import agents
from jaxrl_dist.checkpoints.policy import list_steps, load_policy
from jaxrl_dist.checkpoints.store import Checkpointer, abstract_like
from jaxrl_dist.config import build_config
from jaxrl_dist.envs import make_env
from jaxrl_dist.tools import train_cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CARTPOLE = os.path.join(ROOT, "configs", "impala_cartpole.py")


def finished_run(workdir: str) -> str:
    """A finished run in `workdir`: 3,200 env steps = 10 updates of 320, checkpoints at updates
    5 and 10 (the final one after the final evaluation, with its metric)."""
    rc = train_cli.main(
        [
            "--config",
            CARTPOLE + ":quick",
            "--workdir",
            workdir,
            "--quiet",
            "--config.total_env_steps=3200",
            "--config.checkpoint_every_updates=5",
        ]
    )
    assert rc == 0
    assert list_steps(os.path.join(workdir, "checkpoints")) == [5, 10]
    return workdir


def copy_run(run, tmp_path, summary=False, name="run"):
    """A copy of the run to modify; without its summary.json, a run still training."""
    ignore = None if summary else shutil.ignore_patterns("summary.json")
    return shutil.copytree(run, str(tmp_path / name), ignore=ignore)


def add_step(workdir, step, source="latest", drop=(), **meta_updates):
    """Saves `step` into a run: the state and meta of step `source`, the meta keys `drop`
    removed and `meta_updates` applied. The Checkpointer keeps its default number of steps, so
    older ones go, as in a run."""
    policy = load_policy(workdir, source)
    target = abstract_like(policy.agent.learner.init(jax.random.PRNGKey(0)))
    with Checkpointer(os.path.join(workdir, "checkpoints")) as ckpt:
        state, meta = ckpt.restore(target, policy.step)
        meta = {k: v for k, v in meta.items() if k not in drop}
        meta = {**meta, **meta_updates}
        ckpt.save(step, state, meta, metric=meta.get("eval_metric"))  # as the trainer's Saver


def run_config(run):
    with open(os.path.join(run, "config.json")) as f:
        raw = json.load(f)
    return build_config(raw, agents.get(raw["algorithm"]).config_cls)


def files_of(directory):
    return sorted(
        os.path.relpath(os.path.join(d, n), directory)
        for d, _, names in os.walk(directory)
        for n in names
    )


def cartpole_obs(n):
    env = make_env("CartPole-v1", {}, n, n, seed=7)
    obs, _ = env.reset()
    env.close()
    return obs
