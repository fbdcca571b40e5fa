"""Two learning agents of different algorithms in one Anakin program (issue 40): a Rainbow agent
(device replay) and a PPO agent on pgx's tic-tac-toe (`configs/anakin_two_agents_tictactoe.py`),
two seeds vmapped; a resume from the middle ends bit-identical (and in a second run, PPO
playing Rainbow's past versions: a league across agents, issue 57); a fresh agent learns against
one warm-started from that run and held fixed (`learning_mask`), on 2 processes x 2 devices
and on 1 x 4 alike."""

import json
import os
import shutil
import subprocess
import sys

import jax
import numpy as np
import pytest

from jaxrl_dist.checkpoints.store import Checkpointer, restore_params, tree_digest
from jaxrl_dist.config import ConfigError
from jaxrl_dist.config.cli import load_config
from jaxrl_dist.run.hooks import Hooks, mean_return
from jaxrl_dist.run.trainer import Trainer
from jaxrl_dist.tools.launch import TRAIN, start_processes

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_refusal import assert_refused  # noqa: E402

CONFIG = "configs/anakin_two_agents_tictactoe.py:quick"
UPDATES = 6  # the quick variant's: 32 streams of each agent x 16 moves an update
RUN = {"anakin.num_seeds": 2, "eval_episodes": 10, "checkpoint_every_updates": 3}
# A league across agents (issue 57): Rainbow plays its own pool, PPO plays Rainbow's.
LEAGUE = {
    **RUN,
    "seats.games": "(('rb','ppo'),('ppo','rb'),('rb','pool:rb'),('pool:rb','ppo'))",
    "seats.pool_every_updates": 2,
    "eval_every_updates": 0,
}


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


def test_each_agent_updates_in_lockstep(run):
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


@pytest.fixture(scope="module")
def league(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("anakin_league") / "run")
    trainer = Trainer(load_config(CONFIG, **LEAGUE), workdir, quiet=True)
    summary = trainer.run().summary
    return workdir, summary, trainer


def test_a_league_across_agents_plays_the_others_snapshots_with_its_own_record(league):
    """PPO's league of Rainbow holds Rainbow's own pool's snapshots, bit for bit (taken after
    the same updates of Rainbow's), and PPO's record against each, apart from Rainbow's."""
    _, summary, trainer = league
    rb, ppo = summary["agents"]["rb"], summary["agents"]["ppo"]
    assert "opponent_pool" not in ppo and "agent_pools" not in rb
    own, followed = (trainer.engine.carry[i].shared for i in (0, 1))
    own, theirs = own.league, followed.leagues["rb"]
    np.testing.assert_array_equal(theirs.ids, own.ids)
    np.testing.assert_array_equal(theirs.taken_at, own.taken_at)
    for a, b in zip(jax.tree.leaves(theirs.snapshots), jax.tree.leaves(own.snapshots), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    for seed in range(2):
        mine, its = ppo["agent_pools"]["rb"][seed], rb["opponent_pool"][seed]
        assert [r["id"] for r in mine] == [r["id"] for r in its] == [0, 1, 2, 3]
        assert [r["update"] for r in mine] == [0, 2, 4, 6]  # Rainbow's own updates
        games = lambda records: sum(r["wins"] + r["draws"] + r["losses"] for r in records)  # noqa: E731
        assert games(mine) > 0 and games(its) > 0 and mine != its  # each its own record


def test_a_league_across_agents_resumes_bit_identical(league, tmp_path):
    workdir, summary, _ = league
    copy = str(tmp_path / "run")
    shutil.copytree(workdir, copy)
    shutil.rmtree(os.path.join(copy, "checkpoints", str(UPDATES)))
    result = Trainer(load_config(CONFIG, **LEAGUE), copy, resume=True, quiet=True).run()
    assert result.updates == UPDATES
    assert result.summary["state_sha256"] == summary["state_sha256"]


def test_the_reward_metric_sees_every_agent_and_seed(run):
    workdir, summary, seen = run
    # [seeds x episodes, agents]; then each agent's column of the first seed's episodes, which
    # ranks its best params (checkpoints/best/NAME/).
    assert seen == [(2 * 10, 2), (10, 1), (10, 1)]
    final = summary["evals"][-1]
    for name in ("rb", "ppo"):
        with Checkpointer(os.path.join(workdir, "checkpoints", "best", name), create=False) as c:
            assert c.all_steps() == [final["updates"]]
            assert c.metric(final["updates"]) == pytest.approx(final[f"{name}/seed0_return"])
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
    # The games hold whether each opponent acts greedily: another mask is refused.
    greedy_rb = load_config(CONFIG, **RUN, exploration_mask="(False, True)")
    with pytest.raises(ConfigError, match="config.exploration_mask differs from the resumed"):
        Trainer(greedy_rb, copy, resume=True, quiet=True).run()
    result = Trainer(load_config(CONFIG, **RUN), copy, resume=True, quiet=True).run()
    assert result.updates == UPDATES
    assert result.summary["state_sha256"] == summary["state_sha256"]
    for name in ("rb", "ppo"):
        assert (
            result.summary["agents"][name]["params_sha256"]
            == (summary["agents"][name]["params_sha256"])
        )


def test_a_fixed_warm_started_agent_on_two_processes_equals_one_process(run, tmp_path):
    """PPO from the first run held fixed in every game (`learning_mask` off), a fresh Rainbow
    learning against it, through `scripts/train.py`: 2 processes x 2 fake devices (each holding
    half of every agent's streams) end where 1 process x 4 devices ends (Rainbow's params, the
    episodes, the evaluation), and both keep PPO's params bit for bit."""
    workdir, _, _ = run
    fixed = restore_params(workdir, agent="ppo")
    overrides = {
        "learning_mask": "(True, False)",
        "seats.games": "(('rb','ppo'),('ppo','rb'))",
        "agents.ppo.warm_start": workdir,
        # Rainbow's 6 updates (512 moves each). The cross-process sums add in another order
        # than one process's: by update 9 or so a last-bit difference flips an epsilon-greedy
        # choice and the runs part (measured: 2e-3 apart after 12 updates).
        "total_env_steps": 6 * 512,
    }
    two, one = tmp_path / "two", tmp_path / "one"
    flags = ["--quiet", *(f"--config.{k}={v}" for k, v in overrides.items())]
    argv = lambda out: ["--config", CONFIG, "--workdir", str(out), *flags]  # noqa: E731
    procs = start_processes(argv(two), 2, 2, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    four = {**os.environ, "JAX_PLATFORMS": "cpu", "JAX_NUM_CPU_DEVICES": "4"}
    procs.append(
        subprocess.Popen([sys.executable, TRAIN, *argv(one)], env=four, stderr=subprocess.PIPE)
    )
    # Meanwhile, here: the warm params play from the first move (the streams' first replies).
    trainer = Trainer(load_config(CONFIG, **overrides), str(tmp_path / "here"), quiet=True)
    trainer.engine.begin(None, resume=False)
    first_replies = trainer.engine.carry[0].shared.agents["agent:ppo"]  # in rb's games
    assert tree_digest(jax.tree.map(lambda x: x[0], first_replies)) == tree_digest(fixed)
    for p in procs:
        _, err = p.communicate(timeout=240)
        assert p.returncode == 0, err[-3000:]
    summaries = [json.loads((out / "summary.json").read_text()) for out in (two, one)]
    for summary in summaries:
        ppo, rb = summary["agents"]["ppo"], summary["agents"]["rb"]
        assert (ppo["learning"], ppo["updates"], ppo["env_steps"]) == (False, 0, 0)
        assert ppo["params_sha256"] == tree_digest(fixed)
        assert rb["updates"] == 6 and summary["env_steps"] == rb["env_steps"]
    s2, s1 = summaries
    assert s2["episodes"] == s1["episodes"] > 0
    assert len(set(s2["params_sha256_by_process"])) == 1
    a, b = restore_params(two, agent="rb"), restore_params(one, agent="rb")
    assert (
        max(jax.tree.leaves(jax.tree.map(lambda x, y: float(np.max(np.abs(x - y))), a, b))) < 1e-5
    )
    assert s2["best_eval"]["return_worst_seat"] == s1["best_eval"]["return_worst_seat"]


def test_one_agent_is_loaded_and_evaluated_by_name(run, tmp_path):
    from jaxrl_dist.checkpoints.policy import load_policy
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
        (["--config.sebulba.agent_slots=('rb','ppo')"], "agent_slots"),
        (["--config.exploration_mask=(True, False)"], "makes agent 'ppo' greedy, but it learns"),
    ],
)
def test_bad_anakin_agent_runs_are_refused(tmp_path, capsys, overrides, message):
    assert_refused(CONFIG, overrides, message, tmp_path, capsys)


def test_the_league_config_builds_its_main_agent_and_exploiter(tmp_path):
    """`configs/anakin_league_connect_four.py` (its learning sweep: the results page) passes
    every check a run makes and seats the exploiter against main's live params and pool only."""
    config = load_config("configs/anakin_league_connect_four.py:quick")
    trainer = Trainer(config, str(tmp_path / "league"), quiet=True)
    exploiter = trainer.engine.envs["exploiter"]
    assert set(exploiter.roles) == {"agent:main", "pool:main"}
    assert "pool" in trainer.engine.envs["main"].roles
