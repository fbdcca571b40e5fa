"""`run/layout.py`, the one boundary where a run's number of agents shows: one agent is written
as a run always was, several under `agents` and `NAME/`; every write has its inverse."""

import dataclasses

import numpy as np
import pytest

from jaxrl_dist.data import snapshot as npz
from jaxrl_dist.run.layout import Layout

ONE, TWO = Layout(["learner"]), Layout(["ppo", "dqn"])


@dataclasses.dataclass
class _Counters:
    updates: int
    env_steps: int


def test_one_agent_is_written_bare_and_several_under_their_names():
    assert ONE.tree({"learner": {"w": 1}}) == {"w": 1}
    assert TWO.tree({"ppo": 1, "dqn": 2}) == {"agents": {"ppo": 1, "dqn": 2}}
    assert ONE.keyed("learner", {"losses/loss": 1.0}) == {"losses/loss": 1.0}
    assert TWO.keyed("dqn", {"losses/loss": 1.0}) == {"dqn/losses/loss": 1.0}
    assert ONE.params({"learner": "p"}) == "p" and TWO.params({"ppo": 1, "dqn": 2}) == {
        "ppo": 1,
        "dqn": 2,
    }
    assert ONE.meta({"learner": {"updates": 3}}, policies={}) == {}
    assert TWO.meta({"ppo": {"updates": 3}}, policies={"ppo": {}}) == {
        "agents": {"ppo": {"updates": 3}},
        "policies": {"ppo": {}},
    }
    assert ONE.summary({"learner": {"seeds": []}}) == {"seeds": []}
    assert TWO.summary({"ppo": {}, "dqn": {}}) == {"agents": {"ppo": {}, "dqn": {}}}
    assert ONE.own(lambda: pytest.fail("one agent's own entries are the run's")) == {}
    assert ONE.joined({"learner": 7}) == 7 and TWO.joined({"dqn": 2, "ppo": 1}) == (1, 2)
    assert ONE.alone(["x"]) == "x" and TWO.alone(["x", "y"]) is None
    assert ONE.who("learner") is None and TWO.who("ppo") == "agent ppo"


@pytest.mark.parametrize("layout", [ONE, TWO], ids=["one", "two"])
def test_every_write_has_its_inverse(layout):
    per_lane = {name: {"w": i} for i, name in enumerate(layout.names)}
    assert layout.lanes_of(layout.tree(per_lane)) == per_lane
    assert layout.params_of(layout.params(per_lane)) == per_lane
    assert layout.split(layout.joined(per_lane)) == per_lane
    for name in layout.names:
        record = layout.keyed(name, {"charts/sps": 1.0})
        assert layout.mine(name, record) == {"charts/sps": 1.0}
        assert layout.split_key(next(iter(record))) == (name, "charts/sps")


def test_a_lane_counts_its_own_steps_only_among_several():
    run = _Counters(updates=10, env_steps=1000)
    assert ONE.counters(run, 4, 40) is run
    assert TWO.counters(run, 4, 40) == _Counters(4, 40)
    meta = {"agents": {"ppo": {"updates": 4, "env_steps": 40}}}
    assert ONE.lane_counts(meta, 10, 1000) == {"learner": {"updates": 10, "env_steps": 1000}}
    assert TWO.lane_counts(meta, 10, 1000) == {
        "ppo": {"updates": 4, "env_steps": 40},
        "dqn": {"updates": 0, "env_steps": 0},
    }


class _Items:
    def __init__(self, items):
        self._items = items

    def latest_step(self):
        return 1

    def restore_data(self, step, item="data"):
        return self._items.get(item)


def test_checkpoint_items_pass_through_for_one_agent_and_join_for_several():
    data = npz.to_bytes({"obs": np.arange(3)})
    assert ONE.items({"learner": {"data": data}}) == {"data": data}  # not decoded again
    joined = TWO.items({"ppo": {"data": data}, "dqn": {"pool": data}})
    assert set(npz.from_bytes(joined["data"])) == {"ppo/obs"}
    reader = TWO.lane_items(_Items(joined), "ppo")
    np.testing.assert_array_equal(npz.from_bytes(reader.restore_data(1))["obs"], np.arange(3))
    assert reader.restore_data(1, "pool") is None
    assert ONE.lane_items(reader, "learner") is reader


def test_a_run_has_at_least_one_lane():
    with pytest.raises(ValueError, match="at least one lane"):
        Layout([])
