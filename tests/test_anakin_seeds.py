"""Anakin's many seeds and devices: a vmapped seed is its run alone, per-seed summary, log and
curves, and 1 against 4 fake devices for both data flows (own process)."""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_dist.checkpoints.store import Checkpointer
from jaxrl_dist.config.cli import load_config
from jaxrl_dist.run.trainer import Trainer

QUICK = "configs/anakin_ppo_cartpole.py:quick"


def _run(tmp_path, name, **overrides):
    config = load_config(QUICK, **{"log_every_updates": 4, **overrides})
    return Trainer(config, str(tmp_path / name), quiet=True).run()


def test_vmapped_seeds_match_separate_runs(tmp_path):
    """Seed 1 of a 2-seed vmapped program is the run of seed 1 alone (float tolerance)."""
    config = load_config(QUICK, **{"anakin.num_seeds": 2})
    two = Trainer(config, str(tmp_path / "two")).engine.anakin
    one = Trainer(load_config(QUICK, seed=1), str(tmp_path / "one")).engine.anakin
    both = two.train(two.init(jnp.arange(2, dtype=jnp.uint32)), jnp.int32(5))
    alone = one.train(one.init(jnp.arange(1, 2, dtype=jnp.uint32)), jnp.int32(5))
    pick = lambda tree: jax.tree.map(lambda x: np.asarray(x)[1], tree)  # noqa: E731
    first = lambda tree: jax.tree.map(lambda x: np.asarray(x)[0], tree)  # noqa: E731
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5),
        pick(both.learner.params),
        first(alone.learner.params),
    )
    seed0, seed1 = (jax.tree.leaves(f(both.learner.params))[0] for f in (first, pick))
    assert not np.allclose(seed0, seed1)  # the two seeds are different runs


def test_many_seeds_summary_and_log(tmp_path):
    result = _run(
        tmp_path,
        "seeds",
        **{"anakin.num_seeds": 2},
        eval_every_updates=20,
        stop_at_eval_return=1e9,
        learning_curve=True,
    )
    summary = result.summary
    assert summary["num_seeds"] == 2 and summary["env_steps_all_seeds"] == 2 * 20_480
    assert [s["seed"] for s in summary["seeds"]] == [0, 1]
    assert all(s["best_eval_return"] is not None for s in summary["seeds"])
    evals = summary["evals"]
    assert all(f"seed{i}_return" in e for e in evals for i in range(2))
    # The best params are the first seed's (a checkpoint's policy), ranked by its own return.
    top = max(evals, key=lambda e: e["seed0_return"])  # the earliest of a tie
    assert summary["best_checkpoint_step"] == top["updates"] and len(evals) >= 2
    with Checkpointer(summary["best_checkpoint_dir"], create=False) as ckpt:
        assert ckpt.metric(top["updates"]) == top["seed0_return"]
    lines = [json.loads(x) for x in open(os.path.join(result.workdir, "metrics.jsonl"))]
    assert any("charts/seed1_episode_return" in x for x in lines)
    assert os.path.getsize(os.path.join(result.workdir, "learning_curves_seeds.png")) > 10_000


def test_a_fresh_run_traces_its_init_once(tmp_path, monkeypatch):
    """The carry's shapes come from the jitted init's own trace, which the engine's first call
    reuses: one trace of a seed's init (its rollout's and update's shapes with it), not two.
    jit keys a trace by the arguments as given, so an omitted `warm` there and a passed one
    here were two traces (about 0.45 s of a 4 s run) until both passed it."""
    from jaxrl_dist.anakin.program import Program

    traced = []
    init = Program.init
    monkeypatch.setattr(Program, "init", lambda *a, **k: traced.append(1) or init(*a, **k))
    trainer = Trainer(load_config(QUICK, **{"anakin.num_seeds": 2}), str(tmp_path / "r"))
    trainer.engine.begin(None, resume=False)
    assert len(traced) == 1
