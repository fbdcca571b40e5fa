"""Two learning agents of different algorithms in one Sebulba run (issue 40): a Rainbow agent
and a PPO agent on tic-tac-toe (`configs/two_agents_tictactoe.py:quick`), each with its own
learner, data flow, params and opponent pool; then an agent learning against the PPO agent
warm-started from that run and held fixed (`learning_mask`); PPO also plays Rainbow's past
versions (a league across agents, issue 57). A Rainbow agent that learns while acting greedily:
`test_greedy_agent.py`."""

import json
import os
import shutil
import sys

import jax
import numpy as np
import pytest

from jaxrl_dist.checkpoints.store import Checkpointer, restore_params, tree_digest
from jaxrl_dist.config import ConfigError
from jaxrl_dist.config.cli import load_config
from jaxrl_dist.data import snapshot
from jaxrl_dist.run.hooks import Hooks, mean_return
from jaxrl_dist.run.hparams import HyperparamError
from jaxrl_dist.run.trainer import Trainer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_refusal import assert_refused  # noqa: E402

CONFIG = "configs/two_agents_tictactoe.py:quick"
# Checkpoints at the end only, with Rainbow's replay; 20 evaluation games per agent and pair.
RUN = {
    "checkpoint_every_updates": 0,
    "eval_episodes": 20,
    "agents.rb.replay.save": True,
    "learning_curve": True,
    # The quick variant's games, PPO playing Rainbow's pool where it played its own: a league
    # across agents (issue 57).
    "seats.games": "(('rb','ppo'),('ppo','rb'),('rb','heuristic'),('random','rb'),"
    "('ppo','heuristic'),('random','ppo'),('rb','pool:rb'),('ppo','pool:rb'))",
    "seats.pool_every_updates": 10,
}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("two_agents") / "run")  # a path naming "agent"
    seen = []

    def metric(returns):
        seen.append(np.shape(returns))
        return mean_return(returns)

    hooks = Hooks(reward_metric=metric)
    trainer = Trainer(load_config(CONFIG, **RUN), workdir, quiet=True, hooks=hooks)

    def change(episodes, env_steps):  # PPO's learning rate, once, mid-run
        if env_steps >= 6_000 and not trainer.hparams.has_pending and not changed:
            trainer.set_hyperparams(**{"ppo/learning_rate": 2e-4})
            changed.append(env_steps)

    changed = []
    hooks.on_iteration = change
    summary = Trainer.run(trainer).summary
    summary["hparams_at_end"] = {k: float(v) for k, v in trainer.engine.hparams().items()}
    summary["trainer"] = trainer
    return workdir, summary, seen


def test_each_agent_updates_on_its_own(run):
    workdir, summary, _ = run
    agents = summary["agents"]
    assert set(agents) == {"rb", "ppo"}
    # Each agent's updates follow its own data: Rainbow's replay (4 samples per insert, 128
    # a batch: an update per 32 moves), PPO's queue (16 segments of 16 moves: one per 256).
    rb, ppo = agents["rb"], agents["ppo"]
    assert rb["updates"] + ppo["updates"] == summary["updates"]
    assert rb["env_steps"] + ppo["env_steps"] >= summary["env_steps"] * 0.8
    assert ppo["updates"] >= ppo["env_steps"] // 256 - 2
    assert rb["updates"] >= (rb["env_steps"] - 256) / 32 * 0.5  # learning starts at 256
    assert rb["params_sha256"] != ppo["params_sha256"]
    records = [json.loads(line) for line in open(os.path.join(workdir, "metrics.jsonl"))]
    keys = set().union(*records)
    for name in ("rb", "ppo"):
        assert {f"{name}/losses/loss", f"{name}/charts/updates", f"{name}/stats/policy_lag"} <= keys
    assert "rb/losses/q_mean" in keys and "ppo/losses/approx_kl" in keys


def test_run_time_hyperparameters_are_each_agents_own(run):
    _, summary, _ = run
    at_end = summary["hparams_at_end"]
    assert at_end["ppo/learning_rate"] == pytest.approx(2e-4)
    assert at_end["rb/learning_rate"] == pytest.approx(5e-4)  # Rainbow's own, untouched
    (change,) = summary["hparam_changes"]
    assert change["values"] == {"ppo/learning_rate": 2e-4}
    trainer = summary["trainer"]
    with pytest.raises(HyperparamError, match="bob/learning_rate names no agent's field"):
        trainer.set_hyperparams(**{"bob/learning_rate": 1e-4})
    with pytest.raises(HyperparamError, match="entropy_cost cannot change at run time"):
        trainer.set_hyperparams(**{"ppo/learning_rate": 1e-4, "rb/entropy_cost": 0.1})
    assert not trainer.hparams.has_pending  # nothing of the refused request was queued


def test_the_plot_draws_a_curve_per_agent(run):
    from jaxrl_dist.run.curves import _series

    workdir, _, _ = run
    assert os.path.isfile(os.path.join(workdir, "learning_curves_agents.png"))
    keys = ["rb/charts/episode_return", "ppo/charts/episode_return"]
    train = _series(os.path.join(workdir, "metrics.jsonl"), keys)
    assert all(len(points) >= 3 for points in train)


def test_the_reward_metric_sees_every_agents_returns(run):
    _, summary, seen = run
    assert seen == [(20, 2), (20, 1), (20, 1)]  # the run's, then each agent's own column
    best = summary["best_eval"]
    assert best["return"] == pytest.approx((best["rb/return"] + best["ppo/return"]) / 2)
    # The agents against each other, from the first's side.
    assert {"rb_vs_ppo/win_rate", "rb_vs_ppo/return_worst_seat"} <= set(best)


def test_a_resume_takes_back_every_agent_exactly(run, tmp_path):
    """Learner states (params, optimizers), Rainbow's replay and both opponent pools."""
    workdir, summary, _ = run
    copy = str(tmp_path / "run")
    shutil.copytree(workdir, copy)
    trainer = Trainer(load_config(CONFIG, **RUN), copy, resume=True, quiet=True)
    with Checkpointer(os.path.join(copy, "checkpoints"), create=False) as ckpt:
        step = ckpt.latest_step()
        saved = {
            item: snapshot.from_bytes(ckpt.restore_data(step, item)) for item in ("data", "pool")
        }
        trainer.engine.begin(ckpt, resume=True)
    back = trainer.engine.saved(step)
    assert tree_digest(back.state) == summary["state_sha256"]
    assert back.meta["agents"] == {
        name: {"updates": a["updates"], "env_steps": a["env_steps"]}
        for name, a in summary["agents"].items()
    }
    with Checkpointer(os.path.join(workdir, "checkpoints"), create=False) as ckpt:
        saved_meta = ckpt.restore_meta(step)
    assert back.meta["lane_served_last"] == saved_meta["lane_served_last"]  # the turn goes on
    assert {k.split("/")[0] for k in saved["data"]} == {"rb"}  # PPO's queue is not saved
    assert {k.split("/")[0] for k in saved["pool"]} == {"rb", "ppo"}
    assert any(k.startswith("ppo/pool:rb/snapshot/") for k in saved["pool"])  # the league
    for item, arrays in saved.items():
        again = snapshot.from_bytes(back.process_items[item])
        assert again.keys() == arrays.keys()
        for key, array in arrays.items():
            np.testing.assert_array_equal(again[key], array, err_msg=f"{item} {key}")


def test_a_league_across_agents_plays_the_others_snapshots_with_its_own_record(run):
    """PPO's pool of Rainbow's snapshots: Rainbow's own pool's (the same ids, taken after the
    same updates of Rainbow's, the same params), with PPO's record against each; saved beside
    Rainbow's (the resume above takes both back)."""
    lanes = {lane.name: lane for lane in run[1]["trainer"].engine.lanes}
    own, followed = lanes["rb"].pools.pools["pool"], lanes["ppo"].pools.pools["pool:rb"]
    assert set(lanes["ppo"].pools.pools) == {"pool:rb"}
    assert own.ids() == followed.ids() and len(own.ids()) > 1
    records = followed.records()
    assert [r["update"] for r in records.values()] == [r["update"] for r in own.records().values()]
    for sid in own.ids():
        same = jax.tree.map(np.array_equal, own.params(sid), followed.params(sid))
        assert all(jax.tree.leaves(same)), sid
    played = sum(r["wins"] + r["draws"] + r["losses"] for r in records.values())
    assert played > 0 and records != own.records()


def test_an_agent_learns_against_a_fixed_warm_started_one(run, tmp_path):
    """PPO from the first run plays every game, fixed (`learning_mask` off); a fresh Rainbow
    agent learns against it, its learner capped (`max_updates_per_s`). The fixed params end
    bit-identical to the source's."""
    workdir, _, _ = run
    fixed = restore_params(workdir, agent="ppo")
    config = load_config(
        CONFIG,
        **{
            **RUN,
            "learning_mask": "(True, False)",
            "seats.games": "(('rb','ppo'),('ppo','rb'))",
            "agents.ppo.warm_start": workdir + "@latest",
            "total_env_steps": "4000",
            "max_updates_per_s": "20",
        },
    )
    work = str(tmp_path / "fixed")
    trainer = Trainer(config, work, quiet=True)

    def control(episodes, env_steps):  # an agent's replay setting, by name, at run time
        if not asked:
            asked.append(trainer.control({"rb/replay.samples_per_insert": 2.0}))
            with pytest.raises(HyperparamError, match="agent ppo does not learn"):
                trainer.control({"ppo/replay.samples_per_insert": 2.0})

    asked = []
    trainer.hooks = Hooks(on_iteration=control)
    summary = trainer.run().summary
    assert summary["hparam_changes"][0]["values"] == {"rb/replay.samples_per_insert": 2.0}
    assert trainer.engine.lanes[0].data._limiter._spi == 2
    ppo, rb = summary["agents"]["ppo"], summary["agents"]["rb"]
    assert (ppo["learning"], ppo["updates"], ppo["env_steps"]) == (False, 0, 0)
    assert ppo["params_sha256"] == tree_digest(fixed)
    assert rb["updates"] > 0 and summary["env_steps"] >= 4000
    # Rainbow's learner capped at 20 updates a second, its own cap: below what it makes uncapped
    # even on a slow day (at 60 it sometimes never had to wait); the fixed agent has none.
    records = [json.loads(line) for line in open(os.path.join(work, "metrics.jsonl"))]
    capped = [r for r in records if "rb/stats/cap_wait_s" in r]
    assert len(capped) >= 5 and not any("ppo/stats/cap_wait_s" in r for r in records)
    assert sum(r["rb/stats/cap_wait_s"] for r in capped) > 0
    assert all(r["rb/charts/updates_per_s"] <= 20 * 4 / 3 for r in capped[1:]), capped


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"agents.ppo.warm_start": "{run}"}, None),  # builds: the agent of the same name
        (
            {"agents.rb.warm_start": "{run}", "agents.rb.warm_start_agent": "ppo"},
            "its params do not match this config's network",
        ),
        (
            {"agents.ppo.warm_start": "{run}", "agents.ppo.warm_start_agent": "bob"},
            "no agent 'bob'",
        ),
        ({"exploration_mask": "(True, False)"}, "makes agent 'ppo' greedy, but it learns"),
    ],
)
def test_bad_agent_runs_are_refused_before_anything_is_written(
    run, tmp_path, capsys, overrides, message
):
    """Through `scripts/train.py`'s main: one line, exit 2, no work dir."""
    workdir, _, _ = run
    overrides = {**RUN, **{k: v.format(run=workdir) for k, v in overrides.items()}}
    if message is None:
        Trainer(load_config(CONFIG, **overrides), str(tmp_path / "builds"), quiet=True)
        return
    flags = [f"--config.{k}={v}" for k, v in overrides.items()]
    assert_refused(CONFIG, flags, message, tmp_path, capsys)


def test_one_agent_of_the_run_is_loaded_and_evaluated_by_name(run, tmp_path, capsys):
    from jaxrl_dist.checkpoints.policy import load_policy
    from jaxrl_dist.tools.evaluate_cli import main as evaluate_main

    workdir, summary, _ = run
    policy = load_policy(workdir, agent="ppo")
    assert policy.description["algorithm"] == "ppo"
    assert tree_digest(policy.params) == summary["agents"]["ppo"]["params_sha256"]
    with pytest.raises(ValueError, match=r"holds several agents \(rb, ppo\); name one"):
        load_policy(workdir)
    out = tmp_path / "rb.json"
    argv = [workdir, "--agent", "rb", "--episodes", "4", "--opponent", "agent:ppo"]
    assert evaluate_main([*argv, "--json", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["opponent"] == "agent:ppo" and record["episodes"] == 4
    assert evaluate_main([workdir, "--episodes", "4"]) == 2
    assert "--agent NAME" in capsys.readouterr().err


def test_two_agents_share_a_simultaneous_move_task(tmp_path):
    """Foraging with agent "a" in each env's first slot and "b" in its second, collected
    synchronously (issue 57, item 4): each learns from its own slot with a policy lag of 0 (its
    actors wait for its own learner), the reward metric gets one column per slot, and
    `evaluate` plays an agent's best as the run evaluated it."""
    seen = []

    def metric(returns):
        seen.append(np.shape(returns))
        return mean_return(returns)

    sync = {"sebulba.sync_collection": True, "sebulba.async_envs": False, "batch_size": 32}
    config = load_config("configs/two_agents_foraging.py:quick", eval_episodes=6, **sync)
    hooks = Hooks(reward_metric=metric)
    summary = Trainer(config, str(tmp_path / "f"), quiet=True, hooks=hooks).run().summary
    a, b = summary["agents"]["a"], summary["agents"]["b"]
    assert a["updates"] > 0 and b["updates"] > 0 and a["params_sha256"] != b["params_sha256"]
    with open(tmp_path / "f" / "metrics.jsonl") as f:
        records = [json.loads(line) for line in f]
    lags = [
        r[f"{n}/stats/policy_lag"] for r in records for n in "ab" if f"{n}/stats/policy_lag" in r
    ]
    assert lags and max(lags) == 0.0
    assert seen == [(6, 2), (6, 1), (6, 1)]  # the run's, then each agent's column
    assert {"a/return", "b/return"} <= set(summary["best_eval"])
    # Each agent's best, scored again as the run scored it: in its slot, the other agent of the
    # same step in the other; with the run's own seed, the run's own episodes.
    from jaxrl_dist import evaluate

    best = summary["best_eval"]
    for name in ("a", "b"):
        again = evaluate(str(tmp_path / "f"), 6, step="best", agent=name, seed=config.seed)
        assert again.returns.shape == (6, 1) and again.policy.name == name
        assert again.mean_return == pytest.approx(best[f"{name}/return"])
    with pytest.raises(
        ConfigError, match=r"config.sebulba.agent_slots=\('a',\) must name one agent"
    ):
        load_config("configs/two_agents_foraging.py:quick", **{"sebulba.agent_slots": "('a',)"})


def test_each_agent_has_its_own_best_params(run, tmp_path):
    """`checkpoints/best/NAME/`: every agent's params of the evaluation that was that agent's
    best (ranked by its own column's metric), read by naming the agent."""
    from jaxrl_dist.checkpoints.policy import load_policy
    from jaxrl_dist.tools import evaluate_cli

    workdir, summary, _ = run
    final = summary["evals"][-1]
    assert summary["best_checkpoint_step"] == {"rb": final["updates"], "ppo": final["updates"]}
    for name in ("rb", "ppo"):
        best = load_policy(workdir, "best", agent=name)
        assert best.directory == os.path.join(workdir, "checkpoints", "best", name)
        assert best.meta["best_of"] == name and best.meta["eval_metric"] == final[f"{name}/return"]
        latest = load_policy(workdir, "latest", agent=name)  # one evaluation: at the end
        assert tree_digest(best.params) == tree_digest(latest.params)
    with pytest.raises(ValueError, match="holds several agents.*each has its own best"):
        load_policy(workdir, "best")
    out = str(tmp_path / "e.json")
    flags = ["--agent", "ppo", "--step", "best", "--episodes", "4", "--json", out]
    assert evaluate_cli.main([workdir, *flags]) == 0
    assert json.load(open(out))["step"] == final["updates"]
