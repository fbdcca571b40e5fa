"""A greedy, learning seat of a replay agent (issue 57's "wrong wall"): with one agent and
`config.seats.exploration_mask`, the streams of a greedy seat act by the policy's mode (Rainbow:
epsilon 0) while the other seats explore, and all of them fill the replay, on both engines, as
a greedy agent of `config.agents` does. An on-policy learner is still refused, in one line."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cli_refusal import assert_refused
from train_runs import ROOT

from jaxrl_dist.acting.policy_client import make_inference_step
from jaxrl_dist.agents.base import ActorCore
from jaxrl_dist.config.cli import load_config
from jaxrl_dist.envs import make_env
from jaxrl_dist.envs.seats import SeatedGame
from jaxrl_dist.run.trainer import Trainer

RAINBOW = os.path.join(ROOT, "configs", "rainbow_tictactoe.py:quick")
PPO = os.path.join(ROOT, "configs", "ppo_tictactoe.py:quick")
SEAT_1_GREEDY = {"seats.exploration_mask": (True, False), "total_env_steps": 2000}


def _two_faced_core() -> ActorCore:
    """Samples action 1 (extras 7.0), its mode is action 0; its state counts the calls of each."""

    def act(params, obs, state):
        extras = {"x": jnp.full(obs.shape[:1], 7.0)}
        return jnp.ones(obs.shape[:1], jnp.int32), extras, {"n": state["n"] + 1}

    def greedy_act(params, obs, state):
        return jnp.zeros(obs.shape[:1], jnp.int32), {"n": state["n"] + 100}

    return ActorCore(
        init_state=lambda identity, rows, key: {"n": jnp.zeros(rows, jnp.int32)},
        act=act,
        greedy_act=greedy_act,
    )


def test_a_step_greedy_by_rows_acts_by_the_mode_on_those_rows_only():
    greedy_rows = np.array([False, True, False, True, False])  # state rows; row 4: padding
    step = jax.jit(make_inference_step(_two_faced_core(), greedy_rows))
    state = {"n": jnp.zeros(5, jnp.int32)}
    rows = np.array([3, 0, 1, 4])
    action, _, extras, _, state = step(None, jnp.zeros((4, 2)), rows, np.zeros(4, bool), state)
    np.testing.assert_array_equal(action, [0, 1, 0, 1])
    np.testing.assert_array_equal(extras["x"], [0.0, 7.0, 0.0, 7.0])
    np.testing.assert_array_equal(state["n"], [1, 100, 0, 100, 1])  # row 2 did not act


def test_the_greedy_streams_are_the_seated_games_streams_of_that_seat():
    config = load_config(RAINBOW, **SEAT_1_GREEDY)
    seats, games = config.seats, config.sebulba.envs_per_actor
    mask = seats.greedy_streams(games)
    roles = seats.roles(games)
    players = {name: None for r in roles for name in r if name != "learner"}  # never asked
    env = SeatedGame(make_env("TicTacToe-v1", {}, games, games, seed=0), roles, players)
    seat_of_stream = np.array([seat for _, seat in env._pair])
    env.close()
    assert len(mask) == config.streams_per_actor == len(seat_of_stream)
    np.testing.assert_array_equal(mask, seat_of_stream == 1)
    assert load_config(RAINBOW).seats.greedy_streams(games) is None


@pytest.mark.parametrize("runtime", ["sebulba", "inference_server", "anakin"])
def test_a_rainbow_run_learns_with_a_greedy_seat(runtime, tmp_path, monkeypatch):
    """The run starts, acts and learns; the acting step it builds (the actor's, the inference
    server's over every actor's rows, Anakin's program's) is greedy on exactly the streams of
    seat 1."""
    from jaxrl_dist.acting import fleet, inference_server
    from jaxrl_dist.anakin import engine

    built = {}  # who built an acting step: (its greedy rows, the streams' seats on Anakin)
    real_program = engine.Program

    def recording(module, name):
        real = module.jit_inference_step

        def step(core, greedy=False):
            built[name] = (greedy, None)
            return real(core, greedy)

        monkeypatch.setattr(module, "jit_inference_step", step)

    def program(agent, env, **kwargs):
        built["anakin"] = (kwargs["greedy_rows"], [stream.seat for stream in env.streams])
        # Self-play's other side in seat 1 is greedy too (the acting params play it there).
        selfplay = [s.greedy for s in env.streams if s.opponent == "self" and s.seat == 0]
        assert selfplay and all(selfplay)
        return real_program(agent, env, **kwargs)

    recording(fleet, "sebulba")
    recording(inference_server, "inference_server")
    monkeypatch.setattr(engine, "Program", program)
    overrides = dict(SEAT_1_GREEDY)
    if runtime == "anakin":
        overrides.update(runtime="anakin", **{"sebulba.envs_per_actor": 16})
    if runtime == "inference_server":
        overrides.update({"sebulba.inference.client": "server", "sebulba.num_actor_threads": 2})
    config = load_config(RAINBOW, **overrides)
    summary = Trainer(config, str(tmp_path / "run"), quiet=True).run().summary
    assert summary["updates"] > 0 and summary["stop_reason"] == "total_env_steps reached"
    greedy, seats = built[runtime]
    streams = config.seats.greedy_streams(config.sebulba.envs_per_actor)  # as numbered above
    if runtime == "sebulba":  # the actor's streams, then the padding row
        want = np.append(streams, False)
    elif runtime == "inference_server":  # each actor slot's streams in turn, then the padding
        want = np.append(np.tile(streams, 2), False)
    else:  # one stream per env
        want = np.array(seats) == 1
    np.testing.assert_array_equal(greedy, want)
    assert 0 < np.sum(greedy) < len(greedy)


def test_an_on_policy_learner_in_a_greedy_seat_is_refused(tmp_path, capsys):
    flag = ["--config.seats.exploration_mask=(True,False)"]
    needle = "makes seat 1 greedy, but the learner plays and learns from it on-policy (ppo)"
    assert_refused(PPO, flag, needle, tmp_path, capsys)
