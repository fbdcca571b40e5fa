"""Two learning agents of different algorithms in one Anakin program (issue 40): a Rainbow agent
(device replay) and a PPO agent on pgx's tic-tac-toe (`configs/anakin_two_agents_tictactoe.py`),
two seeds vmapped; a resume from the middle ends bit-identical; a fresh agent learns against
one warm-started from that run and held fixed (`learning_mask`)."""

import json
import os
import shutil
import sys

import numpy as np
import pytest

from jaxrl_dist.config.cli import load_config
from jaxrl_dist.run.checkpoint import restore_params, tree_digest
from jaxrl_dist.run.hooks import Hooks, mean_return
from jaxrl_dist.run.trainer import Trainer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_refusal import assert_refused  # noqa: E402

CONFIG = "configs/anakin_two_agents_tictactoe.py:quick"
UPDATES = 6  # the quick variant's: 32 streams of each agent x 16 moves an update
RUN = {"num_seeds": 2, "eval_episodes": 10, "checkpoint_every_updates": 3}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("anakin_agents") / "run")
    seen = []

    def metric(returns):
        seen.append(np.shape(returns))
        return mean_return(returns)

    hooks = Hooks(reward_metric=metric)
    trainer = Trainer(load_config(CONFIG, **RUN), workdir, quiet=True, hooks=hooks)
    result = trainer.run()
    result.summary["trainer"] = trainer
    return workdir, result.summary, seen


def test_each_agent_learns_in_lockstep(run):
    workdir, summary, _ = run
    rb, ppo = summary["agents"]["rb"], summary["agents"]["ppo"]
    assert summary["updates"] == rb["updates"] == ppo["updates"] == UPDATES
    # Per seed, each agent's own rollouts: 32 streams of 16 moves each.
    assert rb["env_steps"] == ppo["env_steps"] == UPDATES * 32 * 16
    assert summary["env_steps"] == rb["env_steps"] + ppo["env_steps"]
    # Rainbow's replay: 512 moves a rollout x 4 samples per insert / 128 = 16 updates a
    # rollout, from the first (its 256 warm-up moves fill in one).
    assert rb["learner_updates"] == UPDATES * 16 and "learner_updates" not in ppo
    assert rb["params_sha256"] != ppo["params_sha256"]
    assert [len(a["seeds"]) for a in (rb, ppo)] == [2, 2]
    assert all(len(a["opponent_pool"]) == 2 for a in (rb, ppo))  # each its own league
    records = [json.loads(line) for line in open(os.path.join(workdir, "metrics.jsonl"))]
    keys = set().union(*records)
    for name in ("rb", "ppo"):
        assert {f"{name}/losses/loss", f"{name}/charts/episode_return"} <= keys
    assert "rb/losses/q_mean" in keys and "ppo/losses/approx_kl" in keys


def test_the_reward_metric_sees_every_agent_and_seed(run):
    _, summary, seen = run
    assert seen == [(2 * 10, 2)]  # [seeds x episodes, agents]
    best = summary["best_eval"]
    assert best["return"] == pytest.approx((best["rb/return"] + best["ppo/return"]) / 2)
    assert best["return_worst_seat"] == min(
        best["rb/return_worst_seat"], best["ppo/return_worst_seat"]
    )
    assert {"rb_vs_ppo/win_rate", "rb/seed1_return", "ppo/seed0_return"} <= set(best)


def test_run_time_hyperparameters_are_each_agents_own(run):
    engine = run[1]["trainer"].engine
    before = {k: float(v) for k, v in engine.hparams().items()}
    assert {"rb/learning_rate", "rb/epsilon", "ppo/learning_rate", "ppo/entropy_cost"} <= set(
        before
    )
    engine.set_hparams({**before, "ppo/learning_rate": 2e-4})  # the shell passes them all
    after = {k: float(v) for k, v in engine.hparams().items()}
    assert after == {**before, "ppo/learning_rate": pytest.approx(2e-4)}


def test_a_resume_from_the_middle_ends_bit_identical(run, tmp_path):
    """Both learner states (params, optimizers), Rainbow's replay, both leagues, every env."""
    workdir, summary, _ = run
    copy = str(tmp_path / "run")
    shutil.copytree(workdir, copy)
    shutil.rmtree(os.path.join(copy, "checkpoints", str(UPDATES)))
    result = Trainer(load_config(CONFIG, **RUN), copy, resume=True, quiet=True).run()
    assert result.updates == UPDATES
    assert result.summary["state_sha256"] == summary["state_sha256"]
    for name in ("rb", "ppo"):
        assert (
            result.summary["agents"][name]["params_sha256"]
            == (summary["agents"][name]["params_sha256"])
        )


def test_an_agent_learns_against_a_fixed_warm_started_one(run, tmp_path):
    """PPO from the first run is held fixed in every game; a fresh Rainbow learns against it.
    The fixed params end bit-identical to the source's."""
    workdir, _, _ = run
    fixed = restore_params(workdir, agent="ppo")
    config = load_config(
        CONFIG,
        learning_mask="(True, False)",
        **{"seats.games": "(('rb','ppo'),('ppo','rb'))", "agents.ppo.warm_start": workdir},
    )
    summary = Trainer(config, str(tmp_path / "fixed"), quiet=True).run().summary
    ppo, rb = summary["agents"]["ppo"], summary["agents"]["rb"]
    assert (ppo["learning"], ppo["updates"], ppo["env_steps"]) == (False, 0, 0)
    assert ppo["params_sha256"] == tree_digest(fixed)
    assert rb["updates"] > 0 and summary["env_steps"] == rb["env_steps"]


def test_one_agent_is_loaded_and_evaluated_by_name(run, tmp_path):
    from jaxrl_dist.run.policy import load_policy
    from jaxrl_dist.tools.evaluate_cli import main as evaluate_main

    workdir, summary, _ = run
    policy = load_policy(workdir, agent="rb")
    assert policy.description["algorithm"] == "rainbow"
    assert tree_digest(policy.params) == summary["agents"]["rb"]["params_sha256"]
    out = tmp_path / "ppo.json"
    argv = [workdir, "--agent", "ppo", "--episodes", "4", "--opponent", "agent:rb"]
    assert evaluate_main([*argv, "--json", str(out)]) == 0
    assert json.loads(out.read_text())["opponent"] == "agent:rb"


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["--config.agent_slots=('rb','ppo')"], "agent_slots"),
        (["--config.exploration_mask=(True, False)"], "makes agent 'ppo' greedy, but it learns"),
    ],
)
def test_bad_anakin_agent_runs_are_refused(tmp_path, capsys, overrides, message):
    assert_refused(CONFIG, overrides, message, tmp_path, capsys)
