"""Deterministic mode on every Anakin run (issue 57, item 3): a recurrent core and seats run on
Anakin with `deterministic=True` (Sebulba's lockstep actors take the core,
`test_recurrent_runs.py`, and seats against scripted players, `test_deterministic_seats.py`).
Anakin's program is a pure function of the seed already, and the flag adds only XLA's
deterministic-ops flags, which a CPU ignores: here the test shows the runs are accepted and end
with the params of the same run without the flag (the program is unchanged). That an Anakin run
on a GPU repeats bit for bit under those flags is not shown here (`gpu_check.py`'s determinism
part runs Sebulba's IMPALA). Sebulba refuses seats in one line that names Anakin, before
anything else about the run."""

import os

import pytest
from cli_refusal import assert_refused
from train_runs import ROOT

from jaxrl_dist.config.cli import load_config
from jaxrl_dist.run.trainer import Trainer

# Two updates each (4 envs x 128 steps; 64 games x 16 steps).
ANAKIN = {
    "recurrent": (
        "anakin_ppo_cartpole.py:quick",
        {"network.core": "lstm", "total_env_steps": 1024},
    ),
    "seats": ("anakin_ppo_tictactoe.py:quick", {"total_env_steps": 2048}),
}


@pytest.mark.parametrize("case", ANAKIN)
def test_an_anakin_run_takes_deterministic_mode_and_ends_where_it_would(tmp_path, case):
    config_file, overrides = ANAKIN[case]
    spec = os.path.join(ROOT, "configs", config_file)
    digests = []
    for deterministic in (True, False):
        config = load_config(spec, **{**overrides, "deterministic": deterministic})
        result = Trainer(config, str(tmp_path / f"run_{deterministic}"), quiet=True).run()
        assert result.updates == 2
        digests.append(result.summary["params_sha256"])
    assert digests[0] == digests[1]


# Refused before the learner batch deterministic mode asks for (batch_size is left as it is):
# self-play on Sebulba, which Anakin's program takes.
SEBULBA = [
    (
        "ppo_tictactoe.py:quick",
        "drop self-play from config.seats.games (Anakin's program takes it",
    ),
]


@pytest.mark.parametrize(("config_file", "needle"), SEBULBA)
def test_sebulba_refuses_them_in_one_line_naming_anakin(tmp_path, capsys, config_file, needle):
    flags = ["--config.deterministic=True", "--config.sebulba.async_envs=False"]
    config = os.path.join(ROOT, "configs", config_file)
    assert_refused(config, flags, needle, tmp_path, capsys)
