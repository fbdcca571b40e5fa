"""Evaluation beside training (issue 20): results at the snapshot, the XLA evaluator against the
Python one, where evaluation must block, GIFs, and a resume's history."""

from __future__ import annotations

import os
import sys

import jax
import numpy as np
import pytest

from jaxrl_dist import agents
from jaxrl_dist.config import ConfigError
from jaxrl_dist.config.cli import load_config
from jaxrl_dist.config.engines import get_engine
from jaxrl_dist.tools.train_cli import make_trainer

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from train_runs import jsonl_records as _records  # noqa: E402

QUICK = os.path.join(ROOT, "configs", "impala_cartpole.py") + ":quick"
SMALL = {"checkpoint_every_updates": 0, "stop_at_eval_return": None, "log_every_updates": 5}


def test_evaluation_beside_training_logs_at_the_snapshot_and_records_gifs(tmp_path):
    """Evaluation every update on a thread (no rest): updates go on during evaluations, each
    result is logged at its snapshot's env steps, requests while busy are skipped, and every
    second evaluation leaves a GIF named by the evaluated update."""
    workdir = str(tmp_path / "run")
    cfg = load_config(
        QUICK,
        **{
            **SMALL,
            "total_env_steps": 40_000,
            "eval_every_updates": 1,
            "eval_in_background": True,
            "eval_background_share": 1.0,
            "eval_episodes": 4,
            "sebulba.video_every_evals": 2,
        },
    )
    assert cfg.evaluates_in_background(get_engine(cfg.runtime).evaluates_beside_by_default)
    result = make_trainer(cfg, workdir, quiet=True).run()
    evals = _records(workdir, "evals.jsonl")
    background = [e for e in evals if "landed_at_updates" in e]
    # Updates went on during evaluations (an entry that landed later says where), and
    # requests while one ran were skipped (counted in the log).
    assert background and len(evals) < result.updates
    skipped = [
        r["stats/eval_skipped"]
        for r in _records(workdir, "metrics.jsonl")
        if "stats/eval_skipped" in r
    ]
    assert skipped and skipped[-1] > 0
    steps_per_update = 16 * 20
    for entry in evals:
        assert entry["env_steps"] == entry["updates"] * steps_per_update  # the snapshot's
    logged = [r["env_steps"] for r in _records(workdir, "metrics.jsonl") if "eval/return" in r]
    assert logged == [e["env_steps"] for e in evals]
    gifs = sorted(os.listdir(os.path.join(workdir, "videos")))
    played = [e["updates"] for e in evals]
    assert gifs == [f"update_{u:08d}.gif" for u in played[1::2]]  # every second evaluation


def test_evaluation_beside_anakin_chunks_plays_the_blocking_evaluations(tmp_path):
    """The shell's evaluation beside training on the Anakin engine: each evaluation plays a
    snapshot of the params it was asked for (later chunks donate the carry), so it reports
    what the blocking evaluation of the same (deterministic) run reports at that update."""
    anakin = os.path.join(ROOT, "configs", "anakin_ppo_cartpole.py") + ":quick"
    runs = {}
    for background in (False, True):
        cfg = load_config(anakin, eval_every_updates=4, eval_in_background=background)
        workdir = str(tmp_path / f"background_{background}")
        runs[background] = make_trainer(cfg, workdir, quiet=True).run()
    blocking = {e["updates"]: e["return"] for e in runs[False].summary["evals"]}
    beside = runs[True].summary["evals"]
    assert len(blocking) == 10 and len(beside) >= 2
    for entry in beside:
        assert entry["return"] == blocking[entry["updates"]], entry
        assert entry["env_steps"] == entry["updates"] * 4 * 128  # the snapshot's
    assert runs[True].summary["params_sha256"] == runs[False].summary["params_sha256"]


@pytest.mark.parametrize(("core", "envs"), [("none", 0), ("lstm", 0), ("none", 4)])
def test_the_xla_evaluator_plays_the_python_evaluators_episodes(core, envs):
    """Beside training, episodes are stepped inside XLA (no GIL held): the same episodes, env
    seeds and policy keys as the Python evaluator, greedy and sampled; also with fewer envs
    than episodes (`config.eval_envs`: 4 envs play 6, two of them twice)."""
    from jaxrl_dist.envs import env_spec
    from jaxrl_dist.evaluation.base import EvalSetup
    from jaxrl_dist.evaluation.pools import PoolEvaluator, make_evaluator
    from jaxrl_dist.evaluation.xla_loop import XlaEvaluator

    width = 16 if core != "none" else 128  # the core's width, read only with a core
    cfg = load_config(QUICK, **{"network.core": core, "network.core_size": width})
    spec = env_spec(cfg.env_id, cfg.env_kwargs)
    agent = agents.get("impala").make(
        cfg.algo, cfg.network, spec, agents.base.RunShape(1000, 100.0)
    )
    params = agent.learner.actor_params(agent.learner.init(jax.random.PRNGKey(3)))
    device = jax.devices()[0]
    made = {
        in_xla: make_evaluator(
            EvalSetup(cfg.env_id, {}, 6, 11, agent.actor, device, envs), in_xla=in_xla
        )
        for in_xla in (False, True)
    }
    assert type(made[False]) is PoolEvaluator and type(made[True]) is XlaEvaluator
    try:
        for ev in made.values():
            ev.warm_up(params)  # the same key splits on both
        for greedy in (True, False, True):
            python, xla = (made[k].run(params, greedy) for k in (False, True))
            np.testing.assert_array_equal(python.lengths, xla.lengths)
            np.testing.assert_allclose(python.returns, xla.returns)
            assert python.returns.shape == (6, 1)
            # CartPole pays 1 a step: a later episode of an env does not count its reset step
            np.testing.assert_array_equal(python.returns[:, 0], python.lengths)
        assert made[True].run(params, abort=lambda: True) is None
    finally:
        for ev in made.values():
            ev.close()


def test_a_resume_keeps_the_evaluations_that_landed_by_its_checkpoint(tmp_path):
    from jaxrl_dist.run.counters import EvalHistory

    history = EvalHistory(str(tmp_path), True)
    for entry in (
        {"updates": 8},
        {"updates": 10, "landed_at_updates": 13},
        {"updates": 12, "landed_at_updates": 15},
    ):
        history.append({"env_steps": 0, **entry})
    history.resume(13)  # a checkpoint at 13 holds the first two results, not the third
    assert [e["updates"] for e in history.entries] == [8, 10]


def test_evaluation_blocks_where_timing_must_not_matter():
    def beside(path, **overrides):
        cfg = load_config(path, **overrides)
        return cfg.evaluates_in_background(get_engine(cfg.runtime).evaluates_beside_by_default)

    sync = {"sebulba.async_envs": False, "batch_size": 16}
    assert not beside(QUICK, deterministic=True, **sync)
    # Best saves write the evaluated snapshot itself (run/best.py): no need to block.
    assert beside(QUICK, eval_every_updates=10, keep_best_checkpoints=2)
    assert not beside(QUICK, eval_every_updates=0)  # only the end
    with pytest.raises(ConfigError, match="eval_metric.*name of an evaluation statistic"):
        load_config(QUICK, eval_metric="worst seat")
    anakin = os.path.join(ROOT, "configs", "anakin_ppo_cartpole.py")
    assert not beside(anakin)  # a jitted call beside the chunks
    assert beside(anakin, eval_in_background=True)


def test_video_on_an_env_that_does_not_render_is_refused(tmp_path):
    from jaxrl_dist.evaluation.video import video_problem

    cfg = load_config(QUICK, env_id="FrozenLake-v1", **{"sebulba.video_every_evals": 1})
    problem = video_problem(cfg)
    assert problem and "config.sebulba.video_every_evals" in problem and "\n" not in problem
