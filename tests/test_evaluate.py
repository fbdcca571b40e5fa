"""Policies from checkpoints (jaxrl_dist.checkpoints.policy) and scripts/evaluate.py
(jaxrl_dist.tools.evaluate_cli): one quick CartPole run (checkpoints at updates 5 and 10) is
trained once and read by every test."""

import dataclasses
import json
import os
import shutil

import jax
import numpy as np
import pytest
from evaluate_runs import add_step as _add_step
from evaluate_runs import cartpole_obs as _cartpole_obs
from evaluate_runs import copy_run as _copy
from evaluate_runs import files_of as _files
from evaluate_runs import (
    finished_run,
)
from evaluate_runs import run_config as _run_config
from PIL import Image, ImageSequence

from jaxrl_dist.checkpoints.policy import (
    describe_policy,
    list_steps,
    load_policy,
    locate_step,
    resolve_step,
)
from jaxrl_dist.checkpoints.store import tree_digest
from jaxrl_dist.config import ConfigError
from jaxrl_dist.envs import env_spec
from jaxrl_dist.evaluation.video import VIDEO_FRAME_MS, VIDEO_MAX_SIDE
from jaxrl_dist.run.preflight import warm_params
from jaxrl_dist.tools import evaluate_cli


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A finished run: 3,200 env steps = 10 updates of 320, checkpoints at updates 5 and 10
    (the final one after the final evaluation, with its metric)."""
    return finished_run(str(tmp_path_factory.mktemp("evaluate") / "run"))


def test_load_policy_acts_with_the_chosen_step(run):
    policy = load_policy(run)
    assert (policy.step, policy.meta["env_steps"], policy.env_id) == (10, 3200, "CartPole-v1")
    config = _run_config(run)
    expected = describe_policy(config, env_spec(config.env_id, config.env_kwargs))
    assert json.loads(json.dumps(expected)) == policy.description
    assert policy.meta["policy"] == policy.description  # the trainer saved it with the step
    assert policy.description["env_spec"]["obs_dtype"] in ("float32", "float64")

    obs = _cartpole_obs(5)
    action = policy.act(obs)
    assert action.shape == (5,) and np.issubdtype(action.dtype, np.integer)
    assert set(action.tolist()) <= {0, 1}
    np.testing.assert_array_equal(policy.act(obs), action)  # greedy: the same every time
    assert policy.act(obs, greedy=False, key=jax.random.PRNGKey(0)).shape == (5,)
    with pytest.raises(ValueError, match="need a key"):
        policy.act(obs, greedy=False)
    with pytest.raises(ValueError, match=r"\[B, 4\]"):
        policy.act(obs[:, :3])

    earlier = load_policy(os.path.join(run, "checkpoints"), 5)  # the checkpoints dir works too
    assert earlier.step == 5
    assert tree_digest(earlier.params) != tree_digest(policy.params)


def test_the_policy_description_in_meta_is_what_builds_the_network(run, tmp_path):
    work = _copy(run, tmp_path)
    config = _run_config(run)
    description = describe_policy(config, env_spec(config.env_id, config.env_kwargs))
    _add_step(work, 20, policy=description)
    obs = _cartpole_obs(8)
    np.testing.assert_array_equal(load_policy(work, 20).act(obs), load_policy(work, 10).act(obs))
    _add_step(work, 25, drop=("policy",))  # as saved before meta["policy"] existed
    older = load_policy(work, 25)  # built from meta["config"] and EnvPool's spec
    assert "policy" not in older.meta and older.description == load_policy(work, 20).description
    np.testing.assert_array_equal(older.act(obs), load_policy(work, 10).act(obs))

    other = {**description, "network": {**description["network"], "hidden_sizes": [32, 32]}}
    _add_step(work, 30, source=20, policy=other)  # steps 20, 25, 30 kept
    with pytest.raises(ValueError, match="params of step 30 do not fit") as e:
        load_policy(work, 30)
    assert "\n" not in str(e.value)
    _add_step(work, 40, source=20, policy={**description, "format": 99})
    with pytest.raises(ValueError, match="upgrade jaxrl_dist"):
        load_policy(work, 40)
    os.makedirs(os.path.join(work, "checkpoints", "50"))  # a damaged step (an empty copy)
    with pytest.raises(ValueError, match="meta of step 50 .* cannot be read") as e:
        load_policy(work, 50)  # "latest" passes over it (tests/test_checkpoint_damage.py)
    assert "\n" not in str(e.value)


def test_locate_step(run, tmp_path, capsys):
    ckpt_dir = os.path.join(run, "checkpoints")
    assert resolve_step(run, "latest") == 10
    assert resolve_step(run, 5) == resolve_step(run, "5") == 5
    with pytest.raises(ValueError, match=r"step 7 is not a checkpoint .*available: 5, 10"):
        resolve_step(run, 7)
    # The final evaluation's params, written to checkpoints/best/ at its update.
    assert locate_step(run, "best") == (os.path.join(ckpt_dir, "best"), 10)
    assert locate_step(run, "latest") == (ckpt_dir, 10)
    with pytest.raises(ValueError, match="give latest, best or a step number"):
        resolve_step(run, "newest")
    with pytest.raises(FileNotFoundError, match="no checkpoint under"):
        resolve_step(str(tmp_path), "latest")

    # A run saved before checkpoints/best/ existed, with keep_best_checkpoints: its best is its
    # kept step of highest metric.
    work = _copy(run, tmp_path)
    shutil.rmtree(os.path.join(work, "checkpoints", "best"))
    old = load_policy(work, "latest").meta["config"]
    old = {**old, "keep_best_checkpoints": 2}
    for step, metric in ((20, 30.0), (30, 12.5), (40, None)):
        extra = {} if metric is None else {"eval_metric": metric}  # 40: never "best"
        drop = ("best_store",) if metric is not None else ("best_store", "eval_metric")
        _add_step(work, step, drop=drop, config=old, **extra)
    assert list_steps(os.path.join(work, "checkpoints")) == [20, 30, 40]  # 3 kept, as a run
    assert locate_step(work, "best") == (os.path.join(work, "checkpoints"), 20)
    assert resolve_step(work, "latest") == 40

    # Best saves off: no best, refused in one line (by the script too, exit 2), never "latest".
    off = _copy(run, tmp_path, name="off")
    shutil.rmtree(os.path.join(off, "checkpoints", "best"))
    _add_step(off, 20, best_store=0)  # with its evaluation's metric, as the final save has
    with pytest.raises(ValueError, match="saved no best params .*keep_best_checkpoints=0"):
        locate_step(off, "best")
    assert evaluate_cli.main([off, "--step", "best"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "saved no best params" in err
    # The same for a warm start from it.
    with pytest.raises(ConfigError, match=r"warm_start=.*@best.*saved no best params"):
        warm_params(f"{off}@best", None, "CartPole-v1")


def test_evaluate_script_prints_and_writes_the_same_numbers(run, tmp_path, capsys):
    out = str(tmp_path / "e.json")
    assert evaluate_cli.main([run, "--episodes", "4", "--json", out]) == 0
    record = json.load(open(out))
    assert (record["step"], record["env_steps"], record["episodes"]) == (10, 3200, 4)
    assert (record["mode"], record["seed"]) == ("greedy", 10_000)  # run seed 0 + 10,000
    returns = np.array(record["returns"])
    assert returns.shape == (4, 1) and len(record["lengths"]) == 4
    np.testing.assert_array_equal(returns[:, 0], record["lengths"])  # CartPole: +1 per step
    assert record["return"] == pytest.approx(returns.mean())
    assert (record["return_min"], record["return_max"]) == (returns.min(), returns.max())
    row = capsys.readouterr().out.splitlines()[1].split()
    assert row[:3] == ["10", "3,200", "4"]
    assert row[3:] == [f"{record[k]:.1f}" for k in ("return",)] + ["±"] + [
        f"{record[k]:.1f}" for k in ("return_std", "return_min", "return_max", "length")
    ]

    # The default output, and the same seed gives the same episodes.
    assert evaluate_cli.main([run, "--episodes", "4"]) == 0
    again = json.load(open(os.path.join(run, "eval", "step_10_greedy.json")))
    assert again["returns"] == record["returns"]
    assert (
        evaluate_cli.main(
            [
                run,
                "--step",
                "5",
                "--mode",
                "sampled",
                "--seed",
                "3",
                "--episodes",
                "4",
                "--json",
                out,
            ]
        )
        == 0
    )
    sampled = json.load(open(out))
    assert (sampled["step"], sampled["mode"], sampled["seed"]) == (5, "sampled", 3)


def test_the_evaluation_call_takes_a_run_a_policy_or_params_with_their_config(run):
    """`jaxrl_dist.evaluate`: what `scripts/evaluate.py` calls. Every way of naming the same
    step gives the same episodes (the default seed: the run's + 10,000)."""
    import jaxrl_dist
    from jaxrl_dist.run.summary import RunResult

    result = jaxrl_dist.evaluate(run, episodes=4)
    assert isinstance(result, jaxrl_dist.Evaluation)
    assert (result.policy.step, result.seed, result.mode, result.opponent) == (
        10,
        10_000,
        "greedy",
        None,
    )
    assert result.returns.shape == (4, 1) and result.lengths.shape == (4,) and result.seats is None
    assert result.mean_return == pytest.approx(result.returns.mean())
    assert result.mean_length == pytest.approx(result.lengths.mean())
    np.testing.assert_array_equal(result.agent_returns, result.returns.mean(axis=0))
    assert result.seat_returns == {}
    record = result.record()
    assert record["returns"] == result.returns.tolist() and record["step"] == 10

    policy = load_policy(run)
    summary = json.load(open(os.path.join(run, "summary.json")))
    same = [
        jaxrl_dist.evaluate(run + "@latest", episodes=4),
        jaxrl_dist.evaluate(RunResult.from_summary(summary, run), episodes=4),
        jaxrl_dist.evaluate(policy, episodes=4),
        jaxrl_dist.evaluate(policy.params, episodes=4, config=_run_config(run)),
    ]
    for other in same:
        np.testing.assert_array_equal(other.returns, result.returns)
        np.testing.assert_array_equal(other.lengths, result.lengths)

    # Six episodes on two envs (three each, one after the other): CartPole pays 1 a step.
    fewer = jaxrl_dist.evaluate(run, 6, envs=2)
    assert fewer.returns.shape == (6, 1) and fewer.record()["envs"] == 2
    np.testing.assert_array_equal(fewer.returns[:, 0], fewer.lengths)

    earlier = jaxrl_dist.evaluate(run, 3, step=5, mode="sampled", seed=3)
    assert (earlier.policy.step, earlier.seed, earlier.returns.shape) == (5, 3, (3, 1))
    assert jaxrl_dist.evaluate(run + "@5", 3, mode="sampled", seed=3).returns.tolist() == (
        earlier.returns.tolist()
    )


def test_the_evaluation_call_refuses_bad_input_in_one_line(run):
    import jaxrl_dist

    policy = load_policy(run)
    other = _run_config(run)
    narrow = dataclasses.replace(other.network, hidden_sizes=(8,))
    wider = dataclasses.replace(other, network=narrow)
    cases = [
        (dict(source=run, episodes=0), "episodes=0: give a whole number > 0"),
        (dict(source=run, mode="greedier"), "choose greedy or sampled"),
        (dict(source=run, seed=-1), "must be in [0, 2**32)"),
        (dict(source=run, episodes=4, envs=5), "envs=5: give a whole number from 0"),
        (dict(source=run + "@5", step=10), "names step 5 and step=10: give one"),
        (dict(source=run, step="soon"), "give latest, best or a step number"),
        (dict(source=run, config=other), "config= goes with params"),
        (dict(source=policy, step=5), "leave step= and agent= out"),
        (dict(source=policy.params), "or params with config=TrainConfig"),
        (dict(source=policy.params, config=wider), "do not fit the network config.network builds"),
        (dict(source=run, opponent="random"), "an opponent is for turn-based games"),
        (dict(source=run, opponent="bogus"), "opponent 'bogus': choose"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError) as e:
            jaxrl_dist.evaluate(**kwargs)
        assert message in str(e.value) and "\n" not in str(e.value), (kwargs, e.value)


@pytest.mark.parametrize(
    "args, message",
    [
        (["{missing}"], "is not a directory"),
        (["{empty}"], "no checkpoint under"),
        (["{run}", "--step", "7"], "step 7 is not a checkpoint"),
        (["{run}", "--step", "soon"], "give latest, best or a step number"),
        (["{run}", "--episodes", "0"], "--episodes 0: must be > 0"),
        (["{run}", "--episodes", "4", "--envs", "8"], "--envs 8: give 0 (one per episode)"),
        (["{run}", "--mode", "greedier"], "choose greedy or sampled"),
        (["{run}", "--video", "{tmp}/x.mp4"], "name a .gif"),
        (["{run}", "--follow", "--step", "5"], "drop --step"),
        (["{run}", "--episodes", "many"], "invalid int value"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(run, tmp_path, capsys, args, message):
    os.makedirs(tmp_path / "empty")
    names = {
        "run": run,
        "missing": str(tmp_path / "nope"),
        "empty": str(tmp_path / "empty"),
        "tmp": str(tmp_path),
    }
    before = _files(run), _files(tmp_path)
    assert evaluate_cli.main([a.format(**names) for a in args]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("error: ") and captured.err.count("\n") == 1, captured.err
    assert message in captured.err
    assert (_files(run), _files(tmp_path)) == before  # nothing written


def test_video_records_one_episode_as_a_gif(run, tmp_path):
    gif, out = str(tmp_path / "v" / "cartpole.gif"), str(tmp_path / "e.json")
    assert evaluate_cli.main([run, "--episodes", "2", "--video", gif, "--json", out]) == 0
    video = json.load(open(out))["video"]
    assert video["length"] >= 8 and video["return"] == video["length"] and not video["cut"]
    with Image.open(gif) as image:
        assert image.n_frames > 1
        assert max(image.size) == VIDEO_MAX_SIDE  # 600x400 renders, scaled down
        # Identical neighbouring frames are merged, their delays added: the episode's time.
        total_ms = sum(frame.info["duration"] for frame in ImageSequence.Iterator(image))
    assert total_ms == (video["length"] + 1) * VIDEO_FRAME_MS


def test_video_of_an_env_that_does_not_render(run, tmp_path, capsys, monkeypatch):
    problem = evaluate_cli.render_problem("FrozenLake-v1", {})  # EnvPool's toy-text envs
    assert "FrozenLake-v1 does not render" in problem and "render not implemented" in problem
    real = evaluate_cli.render_problem
    # No FrozenLake checkpoint here: the CartPole run's env is replaced in the probe only.
    monkeypatch.setattr(
        evaluate_cli, "render_problem", lambda env_id, kw: real("FrozenLake-v1", kw)
    )
    before = _files(run)
    assert evaluate_cli.main([run, "--video", str(tmp_path / "x.gif")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --video: FrozenLake-v1 does not render") and err.count("\n") == 1
    assert _files(run) == before and not os.listdir(tmp_path)
