"""Hooks, the Python API's result, checkpoint retention and run-time hyperparameters, on real
(seconds-long) CartPole runs."""

import json
import os

import numpy as np
import pytest

from jaxrl_dist.agents.base import RunShape
from jaxrl_dist.checkpoints.store import Checkpointer
from jaxrl_dist.config.cli import parse_args
from jaxrl_dist.errors import RunError
from jaxrl_dist.learning.learner import Learner
from jaxrl_dist.run import hparams
from jaxrl_dist.run.hooks import Hooks
from jaxrl_dist.run.hparams import HyperparamError
from jaxrl_dist.run.trainer import Trainer
from jaxrl_dist.sebulba import lane as lane_module

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CARTPOLE = os.path.join(ROOT, "configs", "impala_cartpole.py")
STEPS_PER_UPDATE = 16 * 20  # the CartPole config's batch x unroll


def _config(*overrides):
    args = ["--config", f"{CARTPOLE}:quick", "--workdir", "unused", *overrides]
    return parse_args(args)[0]


def _num_updates(config):
    """Updates the run makes: the schedules' length (on-policy: batch x unroll env steps each)."""
    return RunShape(config.total_env_steps, config.steps_per_update).num_updates


def _records(workdir, key):
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    return [(r["env_steps"], r[key]) for r in rows if key in r]


def test_hooks_save_best_only_on_a_new_best_and_stop_ends_the_run(tmp_path):
    # The metric is scripted (the hook defines it), so "best" is known in advance: 3 after
    # 1 is a new best, 2 is not, a second 3 is not (it ties), 5 is, and then stop() says yes.
    scripted = iter([1.0, 3.0, 2.0, 3.0, 5.0])
    calls = {"iteration": [], "eval": [], "best": [], "last": [], "stop": [], "shapes": []}

    def reward_metric(returns):
        calls["shapes"].append(returns.shape)
        return next(scripted)

    hooks = Hooks(
        on_iteration=lambda episodes, steps: calls["iteration"].append((episodes, steps)),
        on_eval=lambda report: calls["eval"].append(report),
        save_best=lambda params, metric, steps: calls["best"].append((metric, steps)),
        save_last=lambda params, metric, steps: calls["last"].append((metric, steps)),
        stop=lambda metric, steps: calls["stop"].append(metric) or metric >= 5.0,
        reward_metric=reward_metric,
    )
    config = _config(
        "--config.eval_every_updates=4",
        "--config.eval_episodes=3",
        "--config.keep_checkpoints=1",
        "--config.keep_best_checkpoints=2",
        "--config.learning_curve=true",
        "--config.eval_in_background=false",  # the stop hook's update is the evaluated one
    )
    workdir = str(tmp_path / "run")
    result = Trainer(config, workdir, quiet=True, hooks=hooks).run()

    assert calls["shapes"] == [(3, 1)] * 5  # [episodes, agents]
    assert [r.metric for r in calls["eval"]] == [1.0, 3.0, 2.0, 3.0, 5.0]
    assert [r.best for r in calls["eval"]] == [True, True, False, False, True]
    eval_steps = [r.env_steps for r in calls["eval"]]
    assert eval_steps == [4 * k * STEPS_PER_UPDATE for k in range(1, 6)]
    assert calls["best"] == [(1.0, eval_steps[0]), (3.0, eval_steps[1]), (5.0, eval_steps[4])]
    assert calls["stop"] == [1.0, 3.0, 2.0, 3.0, 5.0]
    # stop() ended the run right after the evaluation that said so (no final evaluation).
    assert result.updates == 20 and result.stop_reason.startswith("the stop hook")
    assert calls["last"] == [(5.0, result.env_steps)]
    steps = [s for _, s in calls["iteration"]]
    assert steps == [k * STEPS_PER_UPDATE for k in range(1, 21)]
    episodes = [e for e, _ in calls["iteration"]]
    assert episodes == sorted(episodes) and episodes[-1] > 0
    assert result.episodes >= episodes[-1]
    # Retention: the newest step (20), and in best/ the two best evaluations' params (5 at
    # update 20, 3 at update 8); the best-1 params of update 4 were deleted when better came.
    assert Checkpointer(result.checkpoint_dir, create=False).all_steps() == [20]
    best = os.path.join(result.checkpoint_dir, "best")
    assert Checkpointer(best, create=False).all_steps() == [8, 20]
    assert result.best_checkpoint == os.path.join(best, "20")
    assert result.best_eval_metric == 5.0 and result.summary["best_checkpoint_step"] == 20
    with open(os.path.join(workdir, "summary.json")) as f:
        assert json.load(f)["best_eval"]["metric"] == 5.0
    assert os.path.getsize(os.path.join(workdir, "learning_curve.png")) > 1000


def test_checkpoint_retention_keeps_latest_and_best(tmp_path):
    import jax.numpy as jnp

    ckpt = Checkpointer(str(tmp_path / "ck"), keep_latest=2, keep_best=2)
    metrics = {1: 5.0, 2: None, 3: 9.0, 4: None, 5: 1.0, 6: 7.0, 7: None, 8: None}
    for step, metric in metrics.items():
        ckpt.save(step, {"x": jnp.full(2, step)}, {"step": step}, metric=metric)
    ckpt.wait()
    assert ckpt.all_steps() == [3, 6, 7, 8] and ckpt.best_step() == 3
    ckpt.close()
    reopened = Checkpointer(str(tmp_path / "ck"), keep_latest=2, keep_best=2, create=False)
    assert reopened.best_step() == 3  # the metrics are read back from disk
    reopened.close()


def test_checkpoints_by_env_steps_and_seconds(tmp_path):
    config = _config(
        f"--config.checkpoint_every_env_steps={5 * STEPS_PER_UPDATE}",
        "--config.total_env_steps=6400",
        "--config.keep_checkpoints=100",
    )
    result = Trainer(config, str(tmp_path / "steps"), quiet=True).run()
    assert result.summary["checkpoint_steps"] == [5, 10, 15, 20]
    # The final evaluation (eval_every_updates=0: only at the end) ran before the save of the
    # last update, so that save holds its metric and is the best step.
    assert result.summary["best_checkpoint_step"] == 20
    with Checkpointer(result.checkpoint_dir, create=False) as ckpt:
        assert ckpt.restore_meta(20)["eval_metric"] == result.best_eval_metric is not None
    every_s = 0.05
    config = _config(
        f"--config.checkpoint_every_s={every_s}",
        "--config.keep_checkpoints=100",
        "--config.total_env_steps=9600",
    )
    result = Trainer(config, str(tmp_path / "seconds"), quiet=True).run()
    steps = result.summary["checkpoint_steps"]
    with Checkpointer(result.checkpoint_dir, create=False) as ckpt:
        walls = [ckpt.restore_meta(step)["wall_time_s"] for step in steps]
    # Saves by time (process 0 asks, every process saves) at least every_s apart, then the
    # final one; a run of a few seconds (compiles included) has several.
    assert len(steps) >= 3 and steps[-1] == result.updates, steps
    timed = walls[:-1]
    assert timed[0] >= every_s
    assert all(b - a >= every_s for a, b in zip(timed, timed[1:], strict=False))


class _RecordingLearner(Learner):
    made: list = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _RecordingLearner.made.append(self)


def test_learning_rate_changed_from_a_hook_without_recompiling(tmp_path, monkeypatch):
    monkeypatch.setattr(lane_module, "Learner", _RecordingLearner)
    config = _config(
        "--config.log_every_updates=1",
        "--config.total_env_steps=6400",
        "--config.algo.anneal_lr=true",  # a change keeps the annealed shape
    )
    workdir = str(tmp_path / "run")
    trainer = Trainer(config, workdir, quiet=True)

    def on_iteration(episodes, env_steps):
        if env_steps == 10 * STEPS_PER_UPDATE:
            trainer.set_hyperparams(learning_rate=1e-4, entropy_cost=0.02)

    trainer.hooks = Hooks(on_iteration=on_iteration)
    with pytest.raises(HyperparamError, match="discount cannot change at run time"):
        trainer.set_hyperparams(discount=0.5)
    with pytest.raises(HyperparamError, match="learning_rate=-1.0 must be > 0"):
        trainer.set_hyperparams(learning_rate=-1.0)
    result = trainer.run()

    lr = dict(_records(workdir, "losses/learning_rate"))
    anneal = lambda update: 1.0 - update / _num_updates(config)  # noqa: E731
    # The logged rate is the one of the update that produced the record (update k+1 used step k).
    assert lr[10 * STEPS_PER_UPDATE] == pytest.approx(1e-3 * anneal(9), rel=1e-5)
    assert lr[11 * STEPS_PER_UPDATE] == pytest.approx(1e-4 * anneal(10), rel=1e-5)
    assert lr[20 * STEPS_PER_UPDATE] == pytest.approx(1e-4 * anneal(19), rel=1e-5)
    assert _records(workdir, "hparams/learning_rate") == [(10 * STEPS_PER_UPDATE, 1e-4)]
    change = result.summary["hparam_changes"]
    assert change == [
        {
            "updates": 10,
            "env_steps": 10 * STEPS_PER_UPDATE,
            "source": "set_hyperparams",
            "values": {"learning_rate": 1e-4, "entropy_cost": 0.02},
        }
    ]
    (learner,) = _RecordingLearner.made
    assert learner._update._cache_size() == 1  # one compile for the whole run
    assert 11 in result.summary["checkpoint_steps"]  # saved after the first update it changed


def test_control_file_changes_a_running_job_and_the_change_survives_resume(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.setattr(hparams, "POLL_EVERY_S", 0.0)  # poll before every update: no timing
    workdir = tmp_path / "run"
    control = workdir / "control.json"
    config = _config(
        "--config.log_every_updates=1",
        "--config.total_env_steps=6400",
        "--config.algo.anneal_lr=true",  # the change keeps the annealed shape, across a resume
    )
    written = []

    def on_iteration(episodes, env_steps):  # another process writing the file, at known times
        update = env_steps // STEPS_PER_UPDATE
        if update == 2:
            control.write_text('{"gamma": 0.5}')
            written.append("bad")
        elif "bad" in written and not control.exists() and "good" not in written:
            control.write_text(json.dumps({"learning_rate": 2e-4}))
            written.append("good")

    Trainer(config, str(workdir), quiet=True, hooks=Hooks(on_iteration=on_iteration)).run()
    assert "control.json rejected (gamma cannot change at run time" in capsys.readouterr().err
    assert (workdir / "control.json.rejected").read_text() == '{"gamma": 0.5}'
    assert json.loads((workdir / "control.json.applied").read_text()) == {"learning_rate": 2e-4}
    # Bad file after update 2, rejected before update 3; good file after update 3, in force
    # from update 4 on.
    assert _records(workdir, "hparams/learning_rate") == [(3 * STEPS_PER_UPDATE, 2e-4)]

    # Resume with a longer run: the changed rate goes on (the config still says 1e-3), and an
    # entropy cost the resume's config changes is a change too.
    config = _config(
        "--config.log_every_updates=1",
        "--config.total_env_steps=8000",
        "--config.algo.entropy_cost=0.03",
        "--config.algo.anneal_lr=true",
    )
    result = Trainer(config, str(workdir), resume=True, quiet=True).run()
    lr = dict(_records(workdir, "losses/learning_rate"))
    after = 21 * STEPS_PER_UPDATE  # the first update after the resume
    assert lr[after] == pytest.approx(2e-4 * (1.0 - 20 / _num_updates(config)), rel=1e-5)
    changes = result.summary["hparam_changes"]
    assert [(c["updates"], c["source"], c["values"]) for c in changes] == [
        (3, "control.json", {"learning_rate": 2e-4}),
        (20, "the config at resume", {"entropy_cost": 0.03}),
    ]


def test_a_hook_exception_ends_the_run_and_a_non_finite_metric_is_an_error(tmp_path):
    config = _config(
        "--config.total_env_steps=3200",
        "--config.checkpoint_every_updates=2",
        "--config.eval_every_updates=4",
        "--config.eval_episodes=2",
        "--config.eval_in_background=False",  # the metric's error at update 8 exactly
    )
    workdir = str(tmp_path / "run")

    def on_iteration(episodes, env_steps):
        if env_steps == 5 * STEPS_PER_UPDATE:
            raise ValueError("a bug in research code")

    with pytest.raises(ValueError, match="a bug in research code"):
        Trainer(config, workdir, quiet=True, hooks=Hooks(on_iteration=on_iteration)).run()
    assert not os.path.exists(os.path.join(workdir, "summary.json"))  # no final save
    # What the run held was released: it resumes in the same process from update 4.
    hooks = Hooks(reward_metric=lambda returns: float("nan"))
    with pytest.raises(RunError, match="reward_metric returned nan; it must return a finite"):
        Trainer(config, workdir, resume=True, quiet=True, hooks=hooks).run()
    with open(os.path.join(workdir, "summary.json")) as f:
        summary = json.load(f)  # valid JSON: the non-finite metric was not recorded
    assert summary["resumed_from_update"] == 4 and summary["updates"] == 8


def _control(tmp_path, primary=True):
    from jaxrl_dist.agents.impala import RUNTIME_HPARAMS, ImpalaConfig

    return hparams.HyperparamControl(ImpalaConfig(), RUNTIME_HPARAMS, str(tmp_path), primary)


def test_control_file_claims_rejects_and_applies(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(hparams, "POLL_EVERY_S", 0.0)
    control = _control(tmp_path)
    path = tmp_path / "control.json"
    bad = {
        b"\xff\xfe{": "codec can't decode",  # not UTF-8 (PowerShell's echo writes UTF-16)
        b'{"entropy_cost": 1e39}': "is not a finite float32",
        b'{"entropy_cost": ' + b"9" * 400 + b"}": "int too large",
        b'{"learning_rate": 0}': "learning_rate=0.0 must be > 0",
        b"[0.1]": "give a JSON object",
    }
    for content, why in bad.items():
        path.write_bytes(content)
        control.poll()
        err = capsys.readouterr().err
        assert "control.json rejected (" in err and why in err, err
        assert not path.exists() and (tmp_path / "control.json.rejected").read_bytes() == content
        assert not control.has_pending
    path.write_text('{"learning_rate": 2e-4}')
    control.poll()
    assert (tmp_path / "control.json.queued").exists() and control.has_pending
    path.write_text('{"learning_rate": 3e-4}')  # the next request: waits for the first's apply
    control.poll()
    assert path.exists()
    row = control.pending_row()
    _, changes, _ = control.apply({}, row)
    assert changes == {"learning_rate": (6e-4, 2e-4)}
    assert json.loads((tmp_path / "control.json.applied").read_text()) == {"learning_rate": 2e-4}
    control.poll()  # the second file is claimed now; removed before it is applied: a warning
    (tmp_path / "control.json.queued").unlink()
    _, changes, _ = control.apply({}, control.pending_row())
    assert changes == {"learning_rate": (2e-4, 3e-4)}
    assert "could not rename" in capsys.readouterr().err
    # NumPy scalars are numbers; only process 0 reads the file.
    control.request({"entropy_cost": np.float32(0.5)})
    assert control.pending_row()[1] == np.float32(0.5)
    path.write_text('{"learning_rate": 1e-4}')
    other = _control(tmp_path, primary=False)
    other.poll()
    assert path.exists() and not other.has_pending


def test_the_best_checkpoint_of_a_tie_is_the_first_as_the_best_evaluation(tmp_path):
    """Counters keep the first evaluation of a tied best metric; the best checkpoint agrees
    (Orbax alone would take the latest)."""
    import jax.numpy as jnp

    ckpt = Checkpointer(str(tmp_path / "ck"), keep_latest=1, keep_best=2)
    for step, metric in {1: 3.0, 2: 9.0, 3: 4.0, 4: 9.0}.items():
        ckpt.save(step, {"x": jnp.full(2, step)}, {"step": step}, metric=metric)
    ckpt.wait()
    assert ckpt.all_steps() == [2, 4] and ckpt.best_step() == 2
    ckpt.close()
