"""Fields a run sets but nothing in it reads are refused in one line (issue 56's audit list),
exit 2, nothing written: the on-policy queue's fields with a replay agent, env epochs outside
deterministic mode, seats fields without a turn-based game; and a set field that is read still
runs (a replay agent beside an on-policy one keeps the queue fields: the on-policy one reads
them)."""

import os

import pytest
from cli_refusal import assert_refused
from train_runs import ROOT

RAINBOW = os.path.join(ROOT, "configs", "rainbow_cartpole.py:quick")
R2D2 = os.path.join(ROOT, "configs", "r2d2_memory.py:quick")
IMPALA = os.path.join(ROOT, "configs", "impala_cartpole.py:quick")

UNREAD = [
    (RAINBOW, ["--config.sebulba.queue_size=4"], "config.sebulba.queue_size=4 is not used by"),
    (
        RAINBOW,
        ["--config.sebulba.max_policy_lag=3"],
        "config.sebulba.max_policy_lag=3 is not used by",
    ),
    (R2D2, ["--config.sebulba.queue_size=4"], "its data flow replays"),
    (IMPALA, ["--config.sebulba.env_epoch_updates=7"], "read in deterministic mode only"),
    (IMPALA, ["--config.seats.pool_capacity=4"], "config.seats.pool_capacity=4 is read only"),
    (IMPALA, ["--config.seats.eval_opponent=heuristic"], "turn-based game with seats"),
    (IMPALA, ["--config.seats.opening_plies=2"], "leave it at 0"),
]


@pytest.mark.parametrize(("config", "overrides", "needle"), UNREAD)
def test_a_field_nothing_reads_is_refused_in_one_line(config, overrides, needle, tmp_path, capsys):
    assert_refused(config, overrides, needle, tmp_path, capsys)


def test_the_queue_fields_are_read_where_one_agent_learns_on_policy():
    """A replay agent beside an on-policy one: the run's queue fields are the on-policy
    agent's, so they pass (the check looks at every agent's flow)."""
    from jaxrl_dist.config.cli import load_config
    from jaxrl_dist.data import flows
    from jaxrl_dist.run.fields import unread_problem

    config = load_config(IMPALA, **{"sebulba.queue_size": 4})
    on_policy, replay = flows.get("on_policy"), flows.get("replay")
    assert unread_problem(config, [replay, on_policy], False) is None
    assert "config.sebulba.queue_size=4" in unread_problem(config, [replay], False)
    lockstep = load_config(IMPALA, deterministic=True, **{"sebulba.env_epoch_updates": 7})
    assert unread_problem(lockstep, [], False) is None
    shared = load_config(IMPALA, eval_background_share=0.5)
    assert unread_problem(shared, [on_policy], True) is None
    assert "config.eval_background_share=0.5 is read only" in unread_problem(shared, [], False)
