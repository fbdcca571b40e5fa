"""Recurrent runs end to end: bit-identical resumes of a memory (Anakin's carry, Sebulba's
lockstep actors with local or central inference), a recurrent run trained, evaluated, saved
and loaded, and the Atari configs with an LSTM after their image torso."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_dist.acting.policy_client import LocalClient
from jaxrl_dist.acting.server_client import ServerClient
from jaxrl_dist.agents.common import make_policy_model
from jaxrl_dist.envs import env_spec

LEAKY = "user_networks:leaky_memory"  # a cell of the user's own (`network.core`), a dict carry


MEMORY_ANAKIN = {
    "env_kwargs": {"obs_indices": (0, 2)},
    "network.core": "lstm",
    "network.core_size": 16,
    "total_env_steps": 16 * 512,
}


def test_anakin_resume_with_recurrent_state_is_bit_identical(tmp_path):
    """The carry holds every env's core state: a run cut after 6 of 16 updates and resumed
    ends with the same state (params, optimizer, envs, cores) as one that ran straight."""
    from train_runs import interrupted_run

    from jaxrl_dist.config.cli import load_config
    from jaxrl_dist.run.trainer import Trainer

    spec = "configs/anakin_ppo_cartpole.py:quick"
    config = load_config(spec, checkpoint_every_updates=4, **MEMORY_ANAKIN)
    whole = Trainer(config, str(tmp_path / "whole"), quiet=True).run()
    cut = interrupted_run(config, str(tmp_path / "cut"), 6 * 512)
    assert cut.updates < whole.updates == 16
    resumed = Trainer(config, str(tmp_path / "cut"), resume=True, quiet=True).run()
    assert resumed.updates == 16
    assert resumed.summary["state_sha256"] == whole.summary["state_sha256"]
    assert resumed.summary["params_sha256"] == whole.summary["params_sha256"]


# Deterministic mode on Sebulba with a memory (issue 57): lockstep actors re-key every unroll
# but keep each env's memory; one update takes one unroll of the actor's 32 envs. Locally the
# memory is a user's cell's dict carry, through the server an LSTM's.
LOCKSTEP_LSTM = {
    "deterministic": True,
    "sebulba.async_envs": False,
    "batch_size": 32,
    "total_env_steps": 8 * 1024,
    "eval_every_updates": 0,
}


@pytest.mark.parametrize("client", ["local", "server"])
def test_a_deterministic_sebulba_recurrent_run_resumes_bit_identical(tmp_path, monkeypatch, client):
    """Stopped after 3 of 8 updates and resumed: the resume replays the epoch's env actions
    and puts back every env's core state the checkpoint saved, so it ends with the params of
    the run that went straight through (through the inference server too). Without the saved
    states put back it ends elsewhere: the memory carried across unrolls is what it restores."""
    from train_runs import interrupted_run

    from jaxrl_dist.config.cli import load_config
    from jaxrl_dist.run.trainer import Trainer

    extra = {"sebulba.inference.client": "server"} if client == "server" else {}
    extra = extra or {"network.core": LEAKY}
    config = load_config("configs/ppo_lstm_memory.py:quick", **LOCKSTEP_LSTM, **extra)
    whole = Trainer(config, str(tmp_path / "whole"), quiet=True).run().summary
    assert whole["updates"] == 8
    for name in ("cut", "forgetful"):
        assert interrupted_run(config, str(tmp_path / name), 3 * 1024).updates == 3
    resumed = Trainer(config, str(tmp_path / "cut"), resume=True, quiet=True).run().summary
    assert resumed["params_sha256"] == whole["params_sha256"]
    for cls in (LocalClient, ServerClient):
        monkeypatch.setattr(cls, "set_memory", lambda self, memory: None)
    forgetful = Trainer(config, str(tmp_path / "forgetful"), resume=True, quiet=True).run()
    assert forgetful.summary["params_sha256"] != whole["params_sha256"]


@pytest.fixture(scope="module")
def lstm_run(tmp_path_factory):
    """`ppo_lstm_memory.py:quick` through `scripts/train.py`'s `main`, with a central inference
    server (which keeps every env's core state) and a checkpoint at the end."""
    from train_runs import train_main

    workdir = str(tmp_path_factory.mktemp("ppo_lstm") / "run")
    summary = train_main(
        "configs/ppo_lstm_memory.py:quick",
        workdir,
        "--config.sebulba.inference.client=server",
        "--config.total_env_steps=8192",
        "--config.eval_every_updates=8",
    )
    return workdir, summary


def test_a_recurrent_run_trains_evaluates_and_saves(lstm_run):
    workdir, summary = lstm_run
    assert summary["env_steps"] >= 8192 and summary["updates"] >= 16
    assert summary["best_eval"]["episodes"] == 4 and summary["best_checkpoint_step"] > 0


def test_load_policy_carries_the_state_across_steps(lstm_run):
    from jaxrl_dist.checkpoints.policy import load_policy

    policy = load_policy(lstm_run[0])
    assert policy.recurrent and policy.spec.obs_shape == (2,)
    with pytest.raises(ValueError, match="act_with_state"):
        policy.act(np.zeros((3, 2), np.float32))
    # two envs see different first observations, then the same ones: their states differ, so
    # the same observation is acted on with different memories
    state = policy.initial_state(2)
    first_obs = np.array([[0.5, 0.1], [-0.5, -0.1]], np.float32)
    _, state = policy.act_with_state(first_obs, state, np.ones(2, bool))
    same = np.zeros((2, 2), np.float32)
    for _ in range(3):
        _, state = policy.act_with_state(same, state)
    h = np.asarray(jax.tree.leaves(state["core"])[1])  # the policy core's LSTM h, [2, 16]
    assert np.abs(h[0] - h[1]).max() > 1e-4
    # and an episode start forgets the past: after a reset both rows hold the same state
    _, reset = policy.act_with_state(same, state, np.ones(2, bool))
    for leaf in jax.tree.leaves(reset["core"]):
        np.testing.assert_array_equal(np.asarray(leaf)[0], np.asarray(leaf)[1])


def test_evaluate_script_plays_a_recurrent_checkpoint(lstm_run, tmp_path, capsys):
    """`scripts/evaluate.py`'s `main` in this process."""
    import json

    from jaxrl_dist.tools.evaluate_cli import main

    out = tmp_path / "eval.json"
    code = main([lstm_run[0], "--episodes", "4", "--json", str(out)])
    assert code == 0, capsys.readouterr().err[-2000:]
    record = json.loads(out.read_text())
    assert record["episodes"] == 4 and record["length"] == record["return"]  # 1 per step


@pytest.mark.parametrize(
    "spec,torso",
    [
        ("configs/impala_atari.py:quick,lstm", "impala_resnet"),
        ("configs/ppo_atari.py:lstm", "nature_cnn"),
    ],
)
def test_the_atari_configs_take_an_lstm_after_their_image_torso(spec, torso):
    from jaxrl_dist.config.cli import load_config

    config = load_config(spec)
    assert (config.network.core, config.network.torso) == ("lstm", torso)
    atari = env_spec("Breakout-v5", {"img_height": 84, "img_width": 84, "stack_num": 4})
    model = make_policy_model(config.network, atari)
    params = jax.jit(model.init)(jax.random.PRNGKey(0))  # one compile, not one per op
    frames = jnp.zeros((3, 2, *atari.obs_shape), jnp.uint8)
    first = jnp.zeros((3, 2), bool)
    unroll = jax.jit(model.unroll)
    policy, values, state = unroll(params, frames, first, model.initial_core_state(2))
    assert policy.shape == (3, 2, atari.num_actions) and values.shape == (3, 2)
    assert jax.tree.leaves(state)[0].shape == (2, config.network.core_size)
