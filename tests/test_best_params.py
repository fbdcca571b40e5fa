"""What a run reports is what it saved (issue 55): the params an evaluation scored are the params
written under its name (`checkpoints/best/`, at the snapshot's own update, with evaluation
beside training), and a run stopped by an evaluation ends with the params that evaluation
scored (taken back from the snapshot), on Sebulba and on Anakin's seeds."""

import os
import types

import jax
import numpy as np
import pytest

from jaxrl_dist.checkpoints import packing
from jaxrl_dist.checkpoints.policy import load_policy
from jaxrl_dist.checkpoints.store import (
    Checkpointer,
    _layout,
    _read_stored,
    _reader,
    best_dir,
    restore_params,
    tree_digest,
)
from jaxrl_dist.config.cli import load_config
from jaxrl_dist.errors import RunError
from jaxrl_dist.evaluation.base import EvalResult
from jaxrl_dist.run.best import BestPolicies
from jaxrl_dist.run.hooks import Hooks
from jaxrl_dist.run.monitor import EvalMonitor
from jaxrl_dist.run.summary import final_eval_note
from jaxrl_dist.run.trainer import Trainer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUICK = os.path.join(ROOT, "configs", "impala_cartpole.py") + ":quick"
ANAKIN = os.path.join(ROOT, "configs", "anakin_ppo_cartpole.py") + ":quick"


@pytest.fixture(scope="module")
def beside(tmp_path_factory):
    """Sebulba, evaluation beside training every 2 updates; the k-th evaluation's metric is
    scripted (1, 3, 2, 3, 5): new bests at the 1st, 2nd and 5th, and the stop hook ends the
    run at the 5th, whose result lands updates after its snapshot."""
    scripted = iter([1.0, 3.0, 2.0, 3.0, 5.0])
    reports, best_params = [], {}

    def save_best(params, metric, env_steps):
        best_params[env_steps] = tree_digest(params)

    hooks = Hooks(
        on_eval=reports.append,
        save_best=save_best,
        stop=lambda metric, steps: metric >= 5.0,
        reward_metric=lambda returns: next(scripted),
    )
    config = load_config(
        QUICK,
        total_env_steps=200 * 320,
        eval_every_updates=2,
        eval_episodes=3,
        eval_in_background=True,
        keep_best_checkpoints=10,
        checkpoint_every_updates=0,
    )
    workdir = str(tmp_path_factory.mktemp("best") / "run")
    result = Trainer(config, workdir, quiet=True, hooks=hooks).run()
    return result, reports, best_params


def test_each_new_best_writes_the_params_it_scored_at_their_update(beside):
    result, reports, best_params = beside
    assert [r.metric for r in reports] == [1.0, 3.0, 2.0, 3.0, 5.0]
    bests = [r for r in reports if r.best]
    best = os.path.join(result.checkpoint_dir, "best")
    assert result.summary["best_checkpoint_dir"] == best
    saves = result.summary["best_saves"]  # what writing them cost the learner's thread
    assert saves["written"] == len(bests) and 0 < saves["learner_s"] < result.summary["wall_time_s"]
    with Checkpointer(best, create=False) as ckpt:
        assert ckpt.all_steps() == [r.updates for r in bests]  # the snapshots' updates
        assert [ckpt.metric(s) for s in ckpt.all_steps()] == [1.0, 3.0, 5.0]
        for report in bests:
            meta = ckpt.restore_meta(report.updates)
            assert meta["env_steps"] == report.env_steps and meta["eval"]["metric"] == report.metric
            assert meta["landed_at_updates"] >= report.updates
            saved = restore_params(best, report.updates)
            assert tree_digest(saved) == best_params[report.env_steps]  # the evaluated params
    assert result.best_checkpoint == os.path.join(best, str(bests[-1].updates))
    assert load_policy(result.workdir, "best").step == bests[-1].updates


def test_a_stop_by_an_evaluation_ends_with_the_params_it_scored(beside):
    result, reports, best_params = beside
    stopping, summary = reports[-1], result.summary
    assert result.stop_reason.startswith("the stop hook")
    # No evaluation after the stopping one is recorded, and none is run at the end.
    assert [e["updates"] for e in summary["evals"]] == [r.updates for r in reports]
    assert summary["final_eval_metric"] == 5.0 and "final_eval_note" not in summary
    assert summary["final_params_update"] == stopping.updates
    # The learners went on to later updates, then took the snapshot back: the final
    # checkpoint, the summary's digest and the policy hold the scored params.
    assert result.updates > stopping.updates
    assert summary["latest_checkpoint_step"] == result.updates
    scored = best_params[stopping.env_steps]
    assert summary["params_sha256"] == scored
    assert tree_digest(restore_params(result.workdir)) == scored
    assert tree_digest(load_policy(result.workdir).params) == scored
    with Checkpointer(result.checkpoint_dir, create=False) as ckpt:
        meta = ckpt.restore_meta(result.updates)
    assert meta["params_update"] == stopping.updates and meta["eval_metric"] == 5.0


def _carry_params(workdir, step):
    """Every seed's learner params in an Anakin checkpoint (`[S, ...]` leaves)."""
    manager = _reader(os.path.join(workdir, "checkpoints"))
    try:
        layout = _layout(manager, step)
        state = packing.unpack(_read_stored(manager, step, layout, None), layout, None)
    finally:
        manager.close()
    return state["carry"]["learner"]["params"]


def test_anakin_seeds_each_take_back_their_own_scored_params(tmp_path):
    """Two seeds, the first evaluation crosses the target: blocking, the run stops at its
    update; beside training, it goes on while the evaluation plays, then every seed takes its
    own params of that update back, the blocking run's (Anakin is a pure function of its seeds)."""
    runs = {}
    for background in (False, True):
        config = load_config(
            ANAKIN,
            **{"anakin.num_seeds": 2},
            eval_every_updates=2,
            eval_in_background=background,
            stop_at_eval_return=1.0,
            checkpoint_every_updates=0,
        )
        runs[background] = Trainer(config, str(tmp_path / str(background)), quiet=True).run()
    blocking, beside = runs[False], runs[True]
    assert blocking.updates == 2 and beside.summary["final_params_update"] == 2
    assert beside.summary["params_sha256"] == blocking.summary["params_sha256"]
    want = _carry_params(blocking.workdir, 2)
    got = _carry_params(beside.workdir, beside.updates)
    assert jax.tree.leaves(want)[0].shape[0] == 2
    jax.tree.map(np.testing.assert_array_equal, got, want)
    # The best params are the first seed's, ranked by its own return.
    entry = beside.summary["evals"][0]
    with Checkpointer(best_dir(beside.checkpoint_dir), create=False) as ckpt:
        assert ckpt.all_steps() == [2] and ckpt.metric(2) == entry["seed0_return"]
    first_seed = jax.tree.map(lambda x: x[0], want)
    assert tree_digest(restore_params(beside.best_checkpoint.rsplit("/", 1)[0], 2)) == (
        tree_digest(first_seed)
    )


def test_a_resume_drops_the_bests_that_landed_after_its_checkpoint(tmp_path):
    names = ["learner"]
    meta = {"policy": {}, "config": {}}
    best = BestPolicies(str(tmp_path), 10, meta, names, lambda snapshot: snapshot)
    params = {"w": np.zeros(3, np.float32)}
    for updates, landed, metric in ((2, 3, 1.0), (4, 6, 2.0), (8, 11, 3.0)):
        entry = {"env_steps": updates * 10, "updates": updates, "wall_time_s": 0.0}
        assert best.offer({"learner": metric}, params, entry, landed) == ["learner"]
    assert best.offer({"learner": 3.0}, params, {**entry, "updates": 9}, 12) == []  # a tie
    assert best.steps() == {"learner": None}  # kept until the run's next save writes them
    best.flush()
    best.resume(up_to_update=10)  # the checkpoint at 10 holds the first two results
    assert best.steps() == {"learner": 4}
    assert best.offer({"learner": 2.5}, params, {**entry, "updates": 8}, 11) == ["learner"]
    best.flush()
    assert best.steps() == {"learner": 8}
    best.close()
    # Each new best beats those before it: only the newest `keep` wait to be written.
    kept = BestPolicies(str(tmp_path / "two"), 2, meta, names, lambda snapshot: snapshot)
    for updates in (1, 2, 3):
        kept.offer({"learner": float(updates)}, params, {**entry, "updates": updates}, updates)
    kept.flush()
    kept.close()  # after the last write
    with Checkpointer(str(tmp_path / "two" / "best"), create=False) as ckpt:
        assert ckpt.all_steps() == [2, 3]


def _monitor(agents=(), seeds=1, stat="return", metric=None):
    config = types.SimpleNamespace(
        eval_mode="greedy",
        stop_at_eval_return=None,
        eval_metric=stat,
        agents=tuple(types.SimpleNamespace(name=n) for n in agents),
        anakin=types.SimpleNamespace(num_seeds=seeds),
        sebulba=types.SimpleNamespace(video_every_evals=0),
        eval_episodes=2,
        num_eval_envs=2,
    )
    hooks = Hooks(reward_metric=metric) if metric else Hooks()
    return EvalMonitor(config, None, hooks=hooks, logger=None, progress=None, history=None)


def test_each_policy_is_ranked_by_its_own_metric():
    # Two agents, two seeds x 2 episodes: each agent's metric is its column's first seed.
    returns = np.array([[1.0, 10.0], [3.0, 30.0], [100.0, 1000.0], [100.0, 1000.0]])
    result = {"greedy": EvalResult(returns, np.ones(4, np.int64), {"a/seed0_win_rate": 0.25})}
    metrics = _monitor(("a", "b"), seeds=2).policy_metrics(result, 0.0)
    assert metrics == {"a": 2.0, "b": 20.0}
    maxed = _monitor(("a", "b"), seeds=2, metric=lambda r: float(np.max(r)))
    assert maxed.policy_metrics(result, 0.0) == {"a": 3.0, "b": 30.0}
    # A statistic: the agent's, of the first seed; a missing one is one line naming the others.
    stat = _monitor(("a",), seeds=2, stat="win_rate")
    assert stat._metric(returns, result["greedy"].stats(), "a/seed0_") == 0.25
    with pytest.raises(RunError, match="eval_metric='win_rate' is not a statistic.*return"):
        stat._metric(returns, result["greedy"].stats(), "b/seed0_")
    # One agent, one seed: the run's own metric.
    assert _monitor().policy_metrics(result, 7.0) == {"learner": 7.0}


def test_a_final_evaluation_below_the_target_says_why():
    summary = {"final_eval_return": 300.0, "best_checkpoint_step": 75, "best_checkpoint_dir": "d"}
    assert final_eval_note(summary, None, None) == ""
    assert final_eval_note({**summary, "final_eval_return": 480.0}, 475.0, None) == ""
    assert "which no evaluation reached" in final_eval_note(summary, 475.0, None)
    first = {"updates": 75, "return": 480.0}
    assert "update 75 reached 480.0; its params are checkpoints/best/ step 75" in (
        final_eval_note(summary, 475.0, first)
    )
    off = {**summary, "best_checkpoint_step": None, "best_checkpoint_dir": None}
    assert "keep_best_checkpoints=0" in final_eval_note(off, 475.0, first)
