"""Config sections that name their owner (`config.sebulba`, `config.anakin`): the old flat names
still work for one release through one map, with a one-line hint; a saved run's config from
before the sections reads through the same map, silently; another engine's section is refused
in one line; `--help_config` shows the sections."""

import dataclasses
import os

import pytest
from cli_refusal import assert_refused
from train_runs import ROOT

from jaxrl_dist.config import ConfigError, build_config, jsonable
from jaxrl_dist.config import moved as moved_names
from jaxrl_dist.config.cli import algo_config_of, load_config, parse_args
from jaxrl_dist.config.engine_sections import ENGINE_SECTIONS, AnakinConfig, SebulbaConfig
from jaxrl_dist.config.moved import MOVED, move_flat_fields, new_path

IMPALA = os.path.join(ROOT, "configs", "impala_cartpole.py:quick")
ANAKIN = os.path.join(ROOT, "configs", "anakin_ppo_cartpole.py:quick")


@pytest.fixture(autouse=True)
def _fresh_hints(monkeypatch):
    """Each test sees the hints a fresh process would print (once per name)."""
    monkeypatch.setattr(moved_names, "_hinted", set())


def test_every_engine_field_has_moved_and_its_section_holds_it():
    for section, cls in ENGINE_SECTIONS.items():
        for field in dataclasses.fields(cls):
            assert MOVED[field.name] == section
    assert new_path("inference.client") == "sebulba.inference.client"
    assert new_path("num_seeds") == "anakin.num_seeds"
    assert new_path("batch_size") is None  # the learner's batch stays the run's


def test_old_flat_overrides_build_the_same_config_with_one_hint_each(capsys):
    old = load_config(IMPALA, envs_per_actor=8, queue_size=3, **{"inference.client": "server"})
    hints = capsys.readouterr().err.strip().splitlines()
    new = load_config(
        IMPALA,
        **{
            "sebulba.envs_per_actor": 8,
            "sebulba.queue_size": 3,
            "sebulba.inference.client": "server",
        },
    )
    assert old == new and new.sebulba.inference.client == "server"
    assert capsys.readouterr().err == ""  # the new names: no hint
    assert hints == [
        "config.envs_per_actor is now config.sebulba.envs_per_actor; the old name works until "
        "the next release: write config.sebulba.envs_per_actor",
        "config.queue_size is now config.sebulba.queue_size; the old name works until the "
        "next release: write config.sebulba.queue_size",
        "config.inference is now config.sebulba.inference; the old name works until the next "
        "release: write config.sebulba.inference",
    ]
    load_config(IMPALA, envs_per_actor=4)
    assert capsys.readouterr().err == ""  # once per name in a process


def test_an_old_flat_config_file_reads_as_its_sections(tmp_path, capsys):
    path = tmp_path / "flat.py"
    path.write_text(
        "def get_config(variant=None):\n"
        "    return {'algorithm': 'impala', 'runtime': 'anakin', 'num_seeds': 3,\n"
        "            'batch_size': 4, 'unroll_length': 8}\n"
    )
    config = load_config(str(path))
    assert config.anakin == AnakinConfig(num_seeds=3)
    assert "config.num_seeds is now config.anakin.num_seeds" in capsys.readouterr().err


def test_an_override_of_the_new_name_wins_over_a_files_old_one(tmp_path):
    path = tmp_path / "flat.py"
    path.write_text(
        "def get_config(variant=None):\n"
        "    return {'algorithm': 'impala', 'envs_per_actor': 8, 'async_envs': False}\n"
    )
    config = load_config(str(path), **{"sebulba.envs_per_actor": 4})
    assert (config.sebulba.envs_per_actor, config.sebulba.async_envs) == (4, False)


def test_a_field_given_both_ways_is_refused_in_one_line():
    with pytest.raises(ConfigError) as e:
        move_flat_fields({"envs_per_actor": 8, "sebulba": {"envs_per_actor": 16}})
    assert str(e.value) == (
        "config.envs_per_actor and config.sebulba.envs_per_actor are both given; keep "
        "config.sebulba.envs_per_actor alone"
    )


@pytest.mark.parametrize("spec", [IMPALA, ANAKIN])
def test_a_saved_config_from_before_the_sections_reads_the_same_silently(spec, capsys):
    """A `config.json` or a checkpoint's meta written before the sections: its engine fields
    at the top level (`inference` a top-level section) build the same config, no hint."""
    config = load_config(spec, **{"sebulba.inference.client": "server"} if spec == IMPALA else {})
    saved = jsonable(config.to_dict())
    flat = {k: v for k, v in saved.items() if k not in ENGINE_SECTIONS}
    for section in ENGINE_SECTIONS:
        flat.update(saved[section])
    assert "sebulba" not in flat and "inference" in flat and "num_seeds" in flat
    again = build_config(flat, algo_config_of(config.algorithm), algo_config_of, saved=True)
    assert again == config
    assert capsys.readouterr().err == ""


def test_another_engines_section_is_refused_on_the_command_line(tmp_path, capsys):
    assert_refused(
        IMPALA,
        ["--config.anakin.num_seeds=2"],
        "config.anakin.num_seeds=2 is not used by config.runtime='sebulba' (config.anakin is "
        "read by config.runtime='anakin' only)",
        tmp_path,
        capsys,
    )


def test_an_old_name_on_the_command_line_is_refused_like_the_new_one(tmp_path, capsys):
    """The map runs before the checks: the old name's hint, then the refusal in the new
    name's terms (one line each), exit 2, nothing written."""
    from jaxrl_dist.tools import train_cli

    workdir = tmp_path / "run"
    argv = ["--config", ANAKIN, "--workdir", str(workdir), "--config.envs_per_actor=8"]
    assert train_cli.main(argv) == 2
    hint, refusal = capsys.readouterr().err.strip().splitlines()
    assert hint.startswith("config.envs_per_actor is now config.sebulba.envs_per_actor;")
    assert refusal.startswith("error: config.sebulba.envs_per_actor=8 is not used by config.runt")
    assert not workdir.exists()


def test_help_config_lists_the_engine_sections():
    from jaxrl_dist.config.describe import help_text

    config, _ = parse_args(["--config", IMPALA, "--help_config"])
    text = help_text(config)
    assert "\nsebulba (read by config.runtime='sebulba' only; refused on another runtime):" in text
    assert "\nanakin (read by config.runtime='anakin' only; refused on another runtime):" in text
    assert "  sebulba.inference.client (str) = 'local'" in text
    assert "  sebulba.envs_per_actor (int) = 16 [this config: 16]" not in text  # default: blank
    assert "\n  envs_per_actor " not in text  # no flat name left at the top


def test_the_sections_check_their_own_values_in_one_line():
    with pytest.raises(ValueError, match=r"^config.sebulba.envs_per_actor=7 must be even"):
        SebulbaConfig(envs_per_actor=7)
    with pytest.raises(ValueError, match=r"^config.anakin.num_seeds=0 must be > 0$"):
        AnakinConfig(num_seeds=0)
    with pytest.raises(ConfigError, match=r"^config.sebulba.queue_size=0 must be > 0$"):
        load_config(IMPALA, **{"sebulba.queue_size": 0})
