"""`config.max_updates_per_s` (the SEED trainer's `max_train_frequency`): the pacing rule on a
fake clock, and the cap held by both engines' runs through `scripts/train.py`'s main, logged
as `charts/updates_per_s` and `stats/cap_wait_s`. Only upper bounds on speed are asserted, and
that the learner waited: load can slow a run, never speed it past the cap."""

import threading

import pytest
from train_runs import jsonl_records, train_main

from jaxrl_dist.threads import RateCap


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_the_cap_spaces_events_without_bursts():
    clock = FakeClock()
    cap = RateCap(4.0, clock)  # one event every 0.25 s
    assert cap.due_in() == 0
    cap.take()
    assert cap.due_in() == pytest.approx(0.25)
    clock.now += 0.1
    assert cap.due_in() == pytest.approx(0.15)
    clock.now += 0.15
    cap.take(2)  # a chunk of two: the next one half a second later
    assert cap.due_in() == pytest.approx(0.5)
    clock.now += 10.0  # an idle spell is not saved up: the next event after this one waits
    cap.take()
    assert cap.due_in() == pytest.approx(0.25)
    record = cap.window(4)
    assert record["charts/updates_per_s"] == pytest.approx(4 / 10.25)
    assert record["stats/cap_wait_s"] == 0.0
    # A poller holds a ready event until it is due: that time counts as waited.
    assert cap.hold() is True
    clock.now += 0.2
    assert cap.hold() is True  # still held, since the first hold
    clock.now += 0.05
    assert cap.hold() is False
    cap.take()
    assert cap.window(5)["stats/cap_wait_s"] == pytest.approx(0.25)
    stop = threading.Event()
    stop.set()
    assert cap.wait(stop) is False  # a stop ends the wait at once


@pytest.mark.parametrize(
    ("config", "flags", "chunk"),
    [
        # 16 updates of 320 env steps; one update at a time
        ("configs/impala_cartpole.py:quick", ["--config.total_env_steps=5120"], 1),
        # 16 updates of 512 env steps, in chunks cut at the logs (at most a second's: 8)
        ("configs/anakin_ppo_cartpole.py:quick", ["--config.total_env_steps=8192"], 4),
    ],
    ids=["sebulba", "anakin"],
)
def test_a_run_holds_its_cap_and_logs_it(tmp_path, config, flags, chunk):
    cap, updates = 8.0, 16
    workdir = str(tmp_path / "run")
    summary = train_main(
        config,
        workdir,
        *flags,
        f"--config.max_updates_per_s={cap}",
        "--config.log_every_updates=4",
    )
    assert summary["updates"] == updates
    # Each step (an update, or Anakin's chunk) starts 1/cap per update of the step before it
    # after that one started: all but the last step's updates take their time.
    assert summary["wall_time_s"] >= (updates - chunk) / cap
    records = [r for r in jsonl_records(workdir, "metrics.jsonl") if "stats/cap_wait_s" in r]
    assert len(records) == updates // 4
    assert sum(r["stats/cap_wait_s"] for r in records) > 0  # the cap held the learner back
    if chunk == 1:  # a log window of 4 updates spans 3 spacings at least
        for r in records[1:]:
            assert r["charts/updates_per_s"] <= cap * 4 / 3 + 1e-6, r
