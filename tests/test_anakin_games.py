"""Board games on the Anakin runtime: `anakin_ppo_tictactoe.py:quick` with an LSTM core through
scripts/train.py with its game evaluations and opponent pool (self-play and pool seats remember
each game: issue 57), its params giving the same results on EnvPool's port and on pgx (each
evaluator carrying the learner's memory per game), an exact resume with the pool and the
memories, connect four, and one-line refusals."""

import json
import os

import jax
import numpy as np
import pytest
from train_runs import interrupted_run, train_main

from jaxrl_dist.checkpoints.policy import load_policy
from jaxrl_dist.checkpoints.store import restore_params, tree_digest
from jaxrl_dist.config import ConfigError
from jaxrl_dist.config.cli import load_config
from jaxrl_dist.envs.jax_games import SeatedJaxGame, evaluation_streams
from jaxrl_dist.evaluation.base import EvalSetup
from jaxrl_dist.evaluation.jax_envs import JaxEvaluator, network_player
from jaxrl_dist.evaluation.pools import make_evaluator
from jaxrl_dist.run.trainer import Trainer

QUICK = "configs/anakin_ppo_tictactoe.py:quick"
LSTM = {"network.core": "lstm", "network.core_size": 32}


@pytest.fixture(scope="module")
def game_run(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("anakin_games") / "run")
    return workdir, train_main(
        QUICK,
        workdir,
        "--config.eval_every_updates=8",
        "--config.checkpoint_every_updates=8",
        *(f"--config.{k}={v}" for k, v in LSTM.items()),
    )


def test_a_warm_start_plays_from_the_first_move(game_run, tmp_path):
    """The warm params go into the init: the learner's, the league's frozen policy and first
    snapshot, and the replies that open the first games (self-play and pool seats), which a
    fresh init's params would have played otherwise."""
    workdir, _ = game_run
    warm = tree_digest(restore_params(workdir))
    config = load_config(QUICK, warm_start=workdir, **LSTM)
    engine = Trainer(config, str(tmp_path / "warm"), quiet=True).engine
    engine.begin(None, resume=False)
    first = lambda tree: jax.tree.map(lambda x: x[0], tree)  # noqa: E731  seed 0's
    assert tree_digest(engine.policy_params()) == warm
    league = engine.carry.shared
    assert tree_digest(first(league.frozen)) == warm
    assert tree_digest(first(first(league.snapshots))) == warm
    fresh = engine.anakin.init(jax.numpy.arange(1, dtype=jax.numpy.uint32), None)
    assert tree_digest(engine.carry.acting.env) != tree_digest(fresh.acting.env)


def test_quick_run_evaluates_games_and_keeps_its_pool(game_run):
    workdir, summary = game_run
    assert summary["runtime"] == "anakin" and summary["updates"] == 16
    assert summary["checkpoint_steps"] == [8, 16]
    evals = [json.loads(x) for x in open(os.path.join(workdir, "metrics.jsonl"))]
    last = [x for x in evals if "eval/greedy_win_rate" in x][-1]
    rates = [last[f"eval/greedy_{k}_rate"] for k in ("win", "draw", "loss")]
    assert sum(rates) == pytest.approx(1.0) and "eval/greedy_return_seat1" in last
    assert 5 <= last["eval/greedy_length"] <= 9  # a game's moves, both seats'
    # A snapshot at the start and every 4 updates; the learner's games against them counted.
    pool = summary["opponent_pool"][0]
    assert [s["update"] for s in pool] == [0, 4, 8, 12, 16]
    assert sum(s["wins"] + s["draws"] + s["losses"] for s in pool[:-1]) > 20


def test_the_same_params_give_the_same_results_on_envpool_and_on_pgx(game_run):
    """The run's policy against random, the learner in each seat in turn, on EnvPool's port
    (the Sebulba evaluator) and on pgx (the Anakin evaluator), 8,000 games each: the return
    and the rates within 0.05 (for this policy's spread, two samples of 8,000 differ by 0.05
    about once in 50,000), each seat's return (4,000 games) within 0.08. Also with the games
    played 16 at a time on 500 envs (`config.eval_envs`): each env's later games counted as
    its first (a new game's opening reply included, its reset step's nothing else)."""
    policy, games = load_policy(game_run[0]), 8000
    core = policy.agent.actor
    setup = EvalSetup("TicTacToe-v1", {}, games, 7, core, jax.local_devices()[0])
    sebulba = make_evaluator(setup, num_players=2, opponent="random")
    on_envpool = sebulba.run(policy.params).stats()
    sebulba.close()
    params = jax.tree.map(lambda x: np.asarray(x)[None], policy.params)  # one seed
    results = {}
    for envs in (games, 500):
        streams = evaluation_streams(envs, "random")
        env = SeatedJaxGame("TicTacToe-v1", streams, network_player(core))
        results[f"pgx on {envs}"] = JaxEvaluator(env, core, games, 7, envs).run(params)
    fewer = make_evaluator(setup._replace(envs=500), num_players=2, opponent="random")
    results["envpool on 500"] = fewer.run(policy.params)
    fewer.close()
    for result in results.values():
        assert len(result.lengths) == games and (result.seats[:500] == np.arange(500) % 2).all()
    bounds = {
        "return": 0.05,
        "win_rate": 0.05,
        "draw_rate": 0.05,
        "loss_rate": 0.05,
        "return_seat0": 0.08,
        "return_seat1": 0.08,
        "length": 0.1,
    }
    for name, result in results.items():
        other = result.stats()
        for key, bound in bounds.items():
            assert abs(on_envpool[key] - other[key]) < bound, (
                name,
                key,
                on_envpool[key],
                other[key],
            )


def test_a_recurrent_policy_is_evaluated_against_perfect_play_by_its_games(game_run, tmp_path):
    """`evaluate.py --opponent perfect` of the LSTM run: the sampled games, each played with its
    own memory; no exact loss rate (that table is per position, and the LSTM's move depends on
    the game so far)."""
    from jaxrl_dist.tools import evaluate_cli

    out = tmp_path / "perfect.json"
    args = [game_run[0], "--opponent", "perfect", "--episodes", "20", "--json", str(out)]
    assert evaluate_cli.main(args) == 0
    record = json.loads(out.read_text())
    assert record["episodes"] == 20 and "loss_rate" in record
    assert "exact_loss_rate" not in record


def _config(**overrides):
    return load_config(QUICK, **{"log_every_updates": 4, **LSTM, **overrides})


def test_resume_with_the_pool_is_bit_identical(game_run, tmp_path):
    """Stopped before the first save at 8 (at the log at 4, or earlier: a chunk runs at most
    about a second of updates, fewer on a busy machine) and resumed: the carry (the pool's
    snapshots and records within it) ends as the uninterrupted fixture run's."""
    same = {"eval_every_updates": 8, "checkpoint_every_updates": 8}
    assert 3 <= interrupted_run(_config(**same), str(tmp_path / "cut"), 3 * 1024).updates < 8
    games = load_config(QUICK).seats.games  # the same roles in another order: same shapes
    other = _config(**same, **{"seats.games": tuple(reversed(games))})
    with pytest.raises(ConfigError, match="config.seats differs from the resumed run's"):
        Trainer(other, str(tmp_path / "cut"), resume=True, quiet=True).run()
    resumed = Trainer(_config(**same), str(tmp_path / "cut"), resume=True, quiet=True).run()
    whole = game_run[1]
    assert resumed.summary["state_sha256"] == whole["state_sha256"]
    assert resumed.summary["opponent_pool"] == whole["opponent_pool"]
    after = [e["return"] for e in resumed.summary["evals"] if e["updates"] in (8, 16)]
    assert after == [e["return"] for e in whole["evals"]]  # (the cut run also evaluated at 4)


def test_connect_four_runs_with_the_shared_config(tmp_path):
    """`ppo_connect_four.py` with `--config.runtime=anakin`: the same file on both runtimes
    (its Sebulba fields at their defaults, as the refusal says)."""
    config = load_config(
        "configs/ppo_connect_four.py:quick",
        runtime="anakin",
        batch_size=16,
        unroll_length=8,
        total_env_steps=16 * 8 * 2,
        eval_episodes=10,
        **{"sebulba.envs_per_actor": 16, "sebulba.queue_size": 2},
    )
    result = Trainer(config, str(tmp_path / "c4"), quiet=True).run()
    assert result.updates == 2 and result.final_eval_return is not None


@pytest.mark.parametrize(
    ("overrides", "expect"),
    [
        ({"seats.opening_plies": 4}, "opening_plies=4 could end a TicTacToe-v1 game"),
        ({"seats.eval_opponent": "checkpoint:/nowhere"}, "a checkpoint opponent plays on Sebulba"),
        ({"env_kwargs": {"x": 1}}, "takes none on Anakin"),
        ({"seats.games": (("learner", "learner", "random"),)}, "gives 3 seats a game"),
        ({"seats.games": ()}, "say who plays each seat"),
    ],
)
def test_game_refusals_are_one_line(tmp_path, overrides, expect):
    with pytest.raises(ConfigError) as e:
        Trainer(_config(**overrides), str(tmp_path / "x"))
    assert expect in str(e.value) and "\n" not in str(e.value)
    assert not os.path.exists(tmp_path / "x")
