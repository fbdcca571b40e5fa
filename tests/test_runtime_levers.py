"""The runtime's throughput levers that are config fields: the GIL switch interval and EnvPool
thread pinning."""

import sys

import pytest

from jaxrl_dist.acting.fleet import pool_affinity
from jaxrl_dist.config import ConfigError
from jaxrl_dist.config.cli import load_config
from jaxrl_dist.run.hooks import Hooks
from jaxrl_dist.run.trainer import Trainer
from jaxrl_dist.threads import switch_interval


def test_a_run_sets_the_switch_interval_and_puts_it_back(tmp_path):
    before = sys.getswitchinterval()
    seen = []
    config = load_config(
        "configs/impala_cartpole.py:quick", switch_interval_s=0.0005, total_env_steps=3_200
    )
    hooks = Hooks(on_iteration=lambda episodes, steps: seen.append(sys.getswitchinterval()))
    Trainer(config, str(tmp_path), quiet=True, hooks=hooks).run()
    assert seen and all(v == pytest.approx(0.0005) for v in seen)
    assert sys.getswitchinterval() == before


def test_switch_interval_zero_leaves_pythons_own_and_errors_restore_it():
    before = sys.getswitchinterval()
    with switch_interval(0.0):
        assert sys.getswitchinterval() == before
    with pytest.raises(RuntimeError), switch_interval(0.002):
        assert sys.getswitchinterval() == pytest.approx(0.002)
        raise RuntimeError("the run failed")
    assert sys.getswitchinterval() == before


def test_each_actor_pins_its_pool_to_its_own_cores():
    # 2 EnvPool threads per actor from core 4: actor 0 on cores 4-5, actor 1 on 6-7, ...,
    # wrapping around the machine's cores.
    assert [pool_affinity(4, slot, 2, 16) for slot in range(4)] == [4, 6, 8, 10]
    assert pool_affinity(12, 3, 2, 16) == 2
    assert pool_affinity(-1, 3, 2, 16) == -1  # no pinning


@pytest.mark.parametrize(
    "overrides",
    [{"switch_interval_s": -0.001}, {"sebulba.env_thread_affinity_offset": -2}],
)
def test_the_levers_refuse_bad_values_in_one_line(overrides):
    with pytest.raises(ConfigError, match=f"config.{next(iter(overrides))}") as e:
        load_config("configs/impala_cartpole.py:quick", **overrides)
    assert "\n" not in str(e.value)


def test_a_pinned_run_trains(tmp_path):
    config = load_config(
        "configs/impala_cartpole.py:quick",
        **{"sebulba.env_thread_affinity_offset": 0},
        total_env_steps=3_200,
    )
    summary = Trainer(config, str(tmp_path), quiet=True).run().summary
    assert summary["env_steps"] >= 3_200 and summary["actor_restarts"] == 0
