"""`config.agents` (issue 40): named agents, their views, overrides and every refusal that
needs no registry lookup beyond the algorithms' config classes. Pure: no JAX program runs."""

import os
import re
import sys

import pytest

from jaxrl_dist.config import ConfigError
from jaxrl_dist.config.agents import agent_views
from jaxrl_dist.config.cli import load_config

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_refusal import assert_refused  # noqa: E402

TWO = "configs/two_agents_tictactoe.py:quick"
GAMES = "seats.games"


def test_each_agent_sees_the_run_from_its_own_seats():
    config = load_config(TWO)
    rb, ppo = agent_views(config)
    assert (rb.name, rb.config.algorithm, rb.config.batch_size) == ("rb", "rainbow", 128)
    assert (ppo.name, ppo.config.algorithm, ppo.config.batch_size) == ("ppo", "ppo", 16)
    assert type(rb.config.algo).__name__ != type(ppo.config.algo).__name__
    assert ("learner", "agent:ppo") in rb.config.seats.games
    assert ("agent:rb", "learner") in ppo.config.seats.games
    assert ("learner", "pool") in rb.config.seats.games  # its own pool only
    assert all("agent:rb" not in g for g in rb.config.seats.games)
    assert rb.config.streams_per_actor == ppo.config.streams_per_actor == 32
    assert (rb.learning, rb.exploring) == (True, True)
    # The top-level agent fields are the first agent's.
    assert (config.algorithm, config.algo) == ("rainbow", rb.config.algo)


def test_each_agents_schedules_span_its_share_of_the_env_steps():
    """Sebulba: equal actors, equal shares. Anakin: every agent updates once per update of the
    run on its own streams, so its share follows its streams (rb 96 of 128 here)."""
    rb, ppo = agent_views(load_config(TWO, total_env_steps=120_000))
    assert rb.config.total_env_steps == ppo.config.total_env_steps == 60_000
    anakin = load_config(
        "configs/anakin_two_agents_tictactoe.py:quick",
        total_env_steps=128_000,
        **{"agents.rb.batch_size": 96},
    )
    rb, ppo = agent_views(anakin)
    assert (rb.config.total_env_steps, ppo.config.total_env_steps) == (96_000, 32_000)


def test_a_run_without_agents_is_one_agent_named_learner():
    config = load_config("configs/ppo_tictactoe.py:quick")
    (view,) = agent_views(config)
    assert view.name == "learner" and view.config is config


def test_overrides_reach_one_agent():
    config = load_config(
        TWO,
        **{
            "agents.ppo.algo.learning_rate": "1e-4",
            "agents.rb.replay.min_size": "100",
            "agents.rb.batch_size": "64",
            "agents.ppo.schedules.entropy_cost": "linear:end=0.1",
            "learning_mask": "(True, False)",
            GAMES: "(('rb','ppo'),('ppo','rb'),('rb','random'))",
        },
    )
    rb, ppo = agent_views(config)
    assert ppo.config.algo.learning_rate == 1e-4 and rb.config.algo.learning_rate != 1e-4
    assert rb.config.replay.min_size == 100 and rb.config.batch_size == 64
    assert ppo.config.schedules == {"entropy_cost": "linear:end=0.1"}
    assert (rb.learning, ppo.learning) == (True, False)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({GAMES: "(('rb','bob'),('ppo','rb'))"}, "names 'bob', which is no agent"),
        ({GAMES: "(('rb','random'),('random','rb'))"}, "agent 'ppo' plays no seat"),
        ({"learning_mask": "(True,)"}, "one bool per agent of config.agents (2: rb, ppo)"),
        ({"exploration_mask": "(True, True, False)"}, "one bool per agent"),
        ({"learning_mask": "(False, False)"}, "at least one agent must learn"),
        ({GAMES: "(('rb','ppo'),('ppo','pool:bob'))"}, "names 'pool:bob', which is no agent"),
        (
            {
                "learning_mask": "(True, False)",
                GAMES: "(('rb','ppo'),('ppo','rb'),('rb','pool:ppo'))",
            },
            "'pool:ppo' plays in game ('rb', 'pool:ppo'), but 'ppo' does not learn",
        ),
        ({GAMES: "(('learner','ppo'),('ppo','rb'))"}, "names 'learner'"),
        ({GAMES: "(('rb','ppo'),('random','random'))"}, "where no agent learns"),
        (
            {
                "deterministic": "True",
                "sebulba.async_envs": "False",
                GAMES: "(('rb','ppo'),('rb','rb'))",
            },
            "cannot take a game that seats one learner twice",
        ),
        (  # deterministic mode takes one unroll of every actor: the agent's own batch field
            {"deterministic": "True", "sebulba.async_envs": "False"},
            "fix it with --config.agents.ppo.batch_size=32",
        ),
        (
            {"sebulba.actor_loop": "xla", "sebulba.async_envs": "False"},
            "needs config.seats.enabled=False (seats are played in Python)",
        ),
        ({"seats.learning_mask": "(True, False)"}, "with config.agents use config.learning_mask"),
        ({"algorithm": "ppo"}, "config.algorithm is set beside config.agents"),
        ({"agents.bob.batch_size": "3"}, "no agent 'bob' in config.agents (rb, ppo)"),
        ({"agents.rb.algorithm": "dqn9"}, "config.agents.rb.algorithm='dqn9' is not registered"),
        ({"agents.rb.algo.bogus": "1"}, "config.agents.rb.algo.bogus is not a config field"),
        ({"agents.rb.batch_size": "-1"}, "config.agents.rb.batch_size=-1 must be >= 0"),
    ],
)
def test_bad_agent_configs_are_refused_in_one_line(overrides, message, tmp_path, capsys):
    """Through `scripts/train.py`'s main: one line, exit 2, no work dir."""
    flags = [f"--config.{k}={v}" for k, v in overrides.items()]
    assert_refused(TWO, flags, message, tmp_path, capsys)


FORAGING = "configs/two_agents_foraging.py:quick"


def test_slots_give_each_agent_its_own_agents_of_every_env():
    a, b = agent_views(load_config(FORAGING))
    assert (
        a.config.sebulba.agent_slots == ("learner", "agent:b") and a.config.streams_per_actor == 32
    )
    assert b.config.sebulba.agent_slots == ("agent:a", "learner") and b.config.recv_rows == 16
    assert a.config.network.hidden_sizes != b.config.network.hidden_sizes


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            {"sebulba.agent_slots": "('a', 'c')"},
            "config.sebulba.agent_slots names 'c', which is no agent",
        ),
        (
            {"sebulba.agent_slots": "('a', 'a')"},
            "agent 'b' plays no slot of config.sebulba.agent_slots",
        ),
        ({"sebulba.agent_slots": "()"}, "name the agent of each with config.sebulba.agent_slots"),
        ({"learning_mask": "(False, False)"}, "at least one agent must learn"),
    ],
)
def test_bad_slots_are_refused_in_one_line(overrides, message):
    with pytest.raises(ConfigError) as error:
        load_config(FORAGING, **overrides)
    assert message in str(error.value) and "\n" not in str(error.value), str(error.value)


def test_masks_without_agents_are_refused():
    with pytest.raises(ConfigError, match="config.learning_mask names or masks agents of"):
        load_config("configs/ppo_tictactoe.py:quick", learning_mask="(True,)")


def test_one_agent_runs_keep_their_seat_checks():
    with pytest.raises(ConfigError, match="names unknown roles"):
        load_config("configs/ppo_tictactoe.py:quick", **{GAMES: "(('learner','bot'),)"})


def test_the_guides_views_block_prints_what_it_says(capsys):
    page = os.path.join(os.path.dirname(__file__), "..", "docs", "guides", "several-agents.md")
    (block,) = re.findall(r"```python\n(.*?)```", open(page).read(), re.S)
    exec(compile(block, "several-agents.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    said = [line[2:] for line in block.splitlines() if line.startswith("# ")]
    assert printed == said


def test_greedy_is_no_agent_name():
    """A greedy seat's snapshot player is named "pool:greedy": no agent may take the name."""
    from jaxrl_dist.config.agents import AgentSection

    with pytest.raises(ConfigError, match="is a role or a log key"):
        AgentSection(name="greedy")
