"""Several learners in one run take turns (issue 40): the processes agree on the lanes ready
everywhere (the AND of their masks), and a rotation picks one, so none starves."""

import numpy as np
import pytest

from jaxrl_dist.run.agreement import CONTINUE, Report, agree
from jaxrl_dist.sebulba.rotation import Rotation


def test_the_agreement_holds_the_lanes_ready_on_every_process():
    rows = np.array(
        [Report(CONTINUE, env_steps=5, ready=0b011), Report(CONTINUE, env_steps=7, ready=0b110)],
        np.int64,
    )
    outcome = agree(rows)
    assert outcome.go and outcome.totals.ready == 0b010  # only lane 1 is ready on both
    assert outcome.totals.env_steps == 12  # the counts are still summed
    one = agree(np.array([Report(CONTINUE)], np.int64))
    assert one.totals.ready == 1  # one learner, as every run before this seam


def test_the_rotation_serves_the_next_ready_lane_and_none_waits_long():
    rotation = Rotation(3)
    assert [rotation.pick(0b111) for _ in range(4)] == [0, 1, 2, 0]
    assert rotation.pick(0) is None and rotation.last == 0  # nothing ready: poll again
    assert rotation.pick(0b100) == 2 and rotation.pick(0b101) == 0
    rng = np.random.default_rng(0)
    for lanes in (1, 2, 5):
        rotation, waited = Rotation(lanes), 0
        for _ in range(500):  # lane 0 always ready, the others at random
            mask = int(rng.integers(0, 1 << lanes)) | 1
            if rotation.pick(mask) == 0:
                waited = 0
            else:
                waited += 1
                assert waited <= lanes - 1
    with pytest.raises(ValueError, match="at least one lane"):
        Rotation(0)


def test_data_rates_not_the_rotation_set_each_lanes_share():
    """Two agents' data arriving at 1 and 5 batches per 10 ticks, one update a tick: each lane
    is served what arrives for it; when both always have data, they alternate."""
    rotation, pending, served = Rotation(2), [0.0, 0.0], [0, 0]
    for _ in range(1000):
        pending[0] += 0.1
        pending[1] += 0.5
        lane = rotation.pick(sum(1 << i for i, p in enumerate(pending) if p >= 1))
        if lane is not None:
            pending[lane] -= 1
            served[lane] += 1
    assert abs(served[0] - 100) <= 1 and abs(served[1] - 500) <= 1
    rotation = Rotation(2)
    assert [rotation.pick(0b11) for _ in range(6)] == [0, 1, 0, 1, 0, 1]
