"""Rainbow on the Anakin runtime, its prioritized replay in the carry: `anakin_rainbow_cartpole.py
:quick` through scripts/train.py, the replay's `min_size` and updates per rollout, an exact
resume with the replay, seats, and one-line refusals (1 against 4 devices: `test_anakin_seeds`)."""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from train_runs import interrupted_run, train_main

from jaxrl_dist.checkpoints.policy import load_policy
from jaxrl_dist.config import ConfigError
from jaxrl_dist.config.cli import load_config
from jaxrl_dist.data import flows
from jaxrl_dist.run.hooks import Hooks
from jaxrl_dist.run.trainer import Trainer

QUICK = "configs/anakin_rainbow_cartpole.py:quick"
STEPS = 16 * 16  # env steps per rollout: 16 envs x 16 steps
UPDATES = 16  # learner updates per rollout: 256 x samples_per_insert 8 / replay batch 128


@pytest.fixture(scope="module")
def rainbow_run(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("anakin_rainbow") / "run")
    return workdir, train_main(
        QUICK, workdir, "--config.eval_every_updates=8", "--config.checkpoint_every_updates=8"
    )


def test_quick_run_updates_from_the_device_replay(rainbow_run):
    """16 rollouts; the replay holds min_size=512 transitions after the second, so 15 of them
    are followed by 16 updates each; the log has the learner's prioritized metrics."""
    workdir, summary = rainbow_run
    assert summary["runtime"] == "anakin" and summary["updates"] == 16
    assert summary["learner_updates"] == 15 * UPDATES
    assert summary["checkpoint_steps"] == [8, 16] and summary["final_eval_return"] is not None
    lines = [json.loads(x) for x in open(os.path.join(workdir, "metrics.jsonl"))]
    learned = [x for x in lines if "losses/loss" in x]
    assert learned and all(np.isfinite(x["losses/loss"]) for x in learned)
    assert 0 < learned[-1]["losses/importance_weight_mean"] <= 1
    assert 1 < learned[-1]["losses/return_steps_mean"] <= 3  # 3-step windows, cut at ends


def test_checkpoint_plays_envpool_cartpole(rainbow_run):
    policy = load_policy(rainbow_run[0])
    from jaxrl_dist.envs import make_env

    env = make_env("CartPole-v1", {}, 4, 4, seed=0)
    obs, _ = env.reset()
    action = np.asarray(policy.act(obs))
    assert action.shape == (4,) and set(action.tolist()) <= {0, 1}


def test_updates_wait_for_min_size_then_follow_each_rollout(tmp_path):
    """No update while the replay holds fewer than min_size=512 transitions (params untouched),
    then exactly `UPDATES` per rollout; the ring fills in rollout order. (The quick config as
    is: its program is the fixture run's, compiled once.)"""
    anakin = Trainer(load_config(QUICK), str(tmp_path / "x")).engine.anakin
    carry = anakin.init(jnp.arange(1, dtype=jnp.uint32), None)
    start = jax.device_get(carry.learner.params)
    steps = []
    for _ in range(4):
        carry = anakin.train(carry, jnp.int32(1))
        steps.append(int(carry.learner.update_step[0]))
        if steps[-1] == 0:
            jax.tree.map(np.testing.assert_array_equal, start, jax.device_get(carry.learner.params))
    assert steps == [0, UPDATES, 2 * UPDATES, 3 * UPDATES]
    assert int(carry.data.size[0]) == 4 * 16 and int(carry.data.next_slot[0]) == 4 * 16
    # Slots 16k .. 16k + 15 hold rollout k + 1, acted by the params of its time: update 0 for
    # the first two, then 16 and 32; the rest of the ring is still empty.
    version = np.asarray(carry.data.ring.policy_version[0])  # [T, slots]
    np.testing.assert_array_equal(version[:, :32], 0)
    np.testing.assert_array_equal(version[:, 32:48], UPDATES)
    np.testing.assert_array_equal(version[:, 48:64], 2 * UPDATES)
    assert not np.asarray(carry.data.ring.obs[0, :, 64:]).any()
    assert float(carry.data.max_priority[0]) > 1.0  # the learner's priorities came back


def test_resume_with_the_replay_is_bit_identical(rainbow_run, tmp_path):
    """Stopped at rollout 4 (a log, before the saves at 8 and 16) and resumed: the whole carry
    (replay ring, priorities, sampler key, learner, envs) ends as the uninterrupted fixture
    run's."""
    same = {"eval_every_updates": 8, "checkpoint_every_updates": 8}
    cut = interrupted_run(load_config(QUICK, **same), str(tmp_path / "cut"), 3 * STEPS)
    assert cut.updates == 4 and cut.summary["learner_updates"] == 3 * UPDATES
    resumed = Trainer(
        load_config(QUICK, **same), str(tmp_path / "cut"), resume=True, quiet=True
    ).run()
    whole = rainbow_run[1]
    assert resumed.updates == whole["updates"] == 16
    assert resumed.summary["learner_updates"] == whole["learner_updates"]
    assert resumed.summary["state_sha256"] == whole["state_sha256"]
    assert resumed.summary["params_sha256"] == whole["params_sha256"]


def test_n_step_changes_at_run_time(tmp_path):
    """A run-time `n_step=1` (as `control.json` asks) reaches the loss from the next rollout on:
    the returns learned from are then one step long."""
    holder = []

    def lower(episodes, env_steps):
        if env_steps == 6 * STEPS:
            holder[0].set_hyperparams(n_step=1)

    config = load_config(QUICK, log_every_updates=1)
    trainer = Trainer(config, str(tmp_path / "hp"), quiet=True, hooks=Hooks(on_iteration=lower))
    holder.append(trainer)
    result = trainer.run()
    assert result.summary["hparam_changes"][0]["updates"] == 6
    lines = [json.loads(x) for x in open(os.path.join(result.workdir, "metrics.jsonl"))]
    logged = {x["charts/updates"]: x for x in lines if "charts/updates" in x}
    # Rollout 1 only fills the replay: no learner metrics are logged for it.
    assert logged[1]["charts/learner_updates"] == 0 and "losses/loss" not in logged[1]
    steps = {u: x["losses/return_steps_mean"] for u, x in logged.items() if u > 1}
    assert all(1.5 < steps[u] <= 3 for u in range(2, 7)) and steps[7] == steps[16] == 1.0


def test_rainbow_plays_seats_on_anakin(tmp_path):
    """`rainbow_tictactoe.py` with `--config.runtime=anakin`: the seated pgx game (self-play,
    scripted and pool seats, the epsilon ladder over its streams) feeding the device replay."""
    config = load_config(
        "configs/rainbow_tictactoe.py:quick",
        runtime="anakin",
        batch_size=16,
        unroll_length=8,
        total_env_steps=16 * 8 * 3,
        eval_episodes=10,
        **{
            "sebulba.envs_per_actor": 16,
            "sebulba.queue_size": 2,
            "replay.batch_size": 32,
            "replay.min_size": 128,
            "replay.samples_per_insert": 2.0,
        },
    )
    result = Trainer(config, str(tmp_path / "ttt"), quiet=True).run()
    assert result.updates == 3 and result.summary["learner_updates"] == 3 * 8
    last = [json.loads(x) for x in open(os.path.join(result.workdir, "evals.jsonl"))][-1]
    assert last["win_rate"] + last["draw_rate"] + last["loss_rate"] == pytest.approx(1.0)


def test_updates_per_rollout_is_exact_for_decimal_ratios():
    """2.2 samples per insert with 20 envs x 20 steps and a batch of 16 is 55 updates, though
    400 * 2.2 / 16 is 55.00000000000001 in floats."""
    config = load_config(
        QUICK,
        batch_size=20,
        unroll_length=20,
        **{"replay.batch_size": 16, "replay.samples_per_insert": 2.2},
    )
    flow = flows.get("prioritized")
    assert flow.device_problem(config) is None
    assert flow.device(config).updates_per_rollout == 55


@pytest.mark.parametrize(
    ("overrides", "expect"),
    [
        ({"replay.samples_per_insert": 1.25}, "gives 2.5 updates per rollout (16 envs x 16"),
        ({"replay.samples_per_insert": 1.25}, "a whole number >= 1: use 1 or 1.5"),
        ({"replay.samples_per_insert": 0.25}, "gives 0.5 updates per rollout"),
        ({"replay.min_size": 1_000, "replay.capacity": 1_000}, "more than the 992 transitions"),
        ({"replay.capacity": 200, "replay.min_size": 128}, "fewer segments than one rollout's"),
        ({"replay.tolerance": 4.0}, "config.replay.tolerance=4.0 is not used by config.runtime"),
        ({"replay.save": False}, "the replay is part of the carry"),
        ({"runtime": "sebulba"}, "config.replay.batch_size=128 is not used by config.runtime="),
    ],
)
def test_refusals_are_one_line(tmp_path, overrides, expect):
    with pytest.raises(ConfigError) as e:
        Trainer(load_config(QUICK, **overrides), str(tmp_path / "x"))
    assert expect in str(e.value) and "\n" not in str(e.value)
    assert not os.path.exists(tmp_path / "x")
