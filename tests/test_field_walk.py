"""No field is accepted and unread: every field of every config section, against every engine and
every algorithm it runs. A short run of each pair records which fields its code reads
(`field_reads.recorded_reads`: checks and copies do not count); each field it does not read,
set alone to another valid value, must then be refused before the run starts (a `ConfigError`,
or a section's own `ValueError`) in a line that names it. A field that a run would take and
ignore fails here, named.

R2D2 on Anakin is refused as a whole (its sequence replay is Sebulba's), so it has no row."""

import dataclasses
import os

import pytest
from field_reads import BESIDE, other_value, recorded_reads
from train_runs import IMPALA_ON_ANAKIN, ROOT

from jaxrl_dist.config import ConfigError, TrainConfig
from jaxrl_dist.config.cli import load_config
from jaxrl_dist.config.sections import field_value, leaf_paths
from jaxrl_dist.run.trainer import Trainer


def _config(name: str) -> str:
    return os.path.join(ROOT, "configs", name)


# (engine, algorithm) -> (config, overrides): the suite's quick configs, run for a few updates.
PAIRS = {
    ("sebulba", "impala"): (_config("impala_cartpole.py:quick"), {}),
    ("sebulba", "ppo"): (_config("ppo_cartpole.py:quick"), {}),
    ("sebulba", "rainbow"): (_config("rainbow_cartpole.py:quick"), {}),
    ("sebulba", "r2d2"): (_config("r2d2_memory.py:quick"), {}),
    ("anakin", "impala"): (_config("impala_cartpole.py:quick"), IMPALA_ON_ANAKIN),
    ("anakin", "ppo"): (_config("anakin_ppo_cartpole.py:quick"), {}),
    ("anakin", "rainbow"): (_config("anakin_rainbow_cartpole.py:quick"), {}),
}
UPDATES = 3  # enough for a log line, the learner's steady state and the final save


def with_path(config, path: str, value):
    """`config` with the field at dotted `path` set to `value` (every section's checks run)."""
    head, _, rest = path.partition(".")
    if not rest:
        return dataclasses.replace(config, **{head: value})
    return dataclasses.replace(config, **{head: with_path(getattr(config, head), rest, value)})


def short(spec: str, overrides: dict) -> TrainConfig:
    config = load_config(spec, **overrides)
    steps = config.batch_size * config.unroll_length * UPDATES
    if config.algorithm in ("rainbow", "r2d2"):  # the replay fills to `min_size` transitions first
        steps += config.replay.min_size
    return dataclasses.replace(
        config, total_env_steps=steps, eval_episodes=2, log_every_updates=1, learning_curve=False
    )


@pytest.mark.parametrize(("engine", "algorithm"), list(PAIRS))
def test_no_field_is_accepted_and_unread(engine, algorithm, tmp_path):
    config = short(*PAIRS[engine, algorithm])
    assert (config.runtime, config.algorithm) == (engine, algorithm)
    with recorded_reads(type(config.algo)) as reads:
        Trainer(config, str(tmp_path / "run"), quiet=True).run()
    fields = [f for f in leaf_paths(TrainConfig) if f != "algo"]
    fields += leaf_paths(type(config.algo), "algo.")
    unread = [f for f in fields if f not in reads]
    assert "sebulba.envs_per_actor" in reads if engine == "sebulba" else "anakin.num_seeds" in reads
    accepted, elsewhere = [], []
    for i, path in enumerate(unread):
        value = other_value(path, field_value(config, path))
        try:
            probe = config
            for beside, needed in BESIDE.get(path, {}).items():
                probe = with_path(probe, beside, needed)
            probe = with_path(probe, path, value)
            Trainer(probe, str(tmp_path / f"probe{i}"), quiet=True)
        except (ConfigError, ValueError) as e:
            if path not in str(e):  # refused, but for something else than this field
                elsewhere.append(f"config.{path}={value!r}: {e}")
            continue  # refused before the run
        accepted.append(f"config.{path}={value!r} (was {field_value(config, path)!r})")
    assert not accepted, f"{engine}/{algorithm} accepts and never reads: {accepted}"
    assert not elsewhere, f"{engine}/{algorithm}: a probe refused for another field: {elsewhere}"
