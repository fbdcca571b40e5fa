"""Every run field, on every engine: honoured by the run shell, used by the engine, or refused
by it in one line before anything is written. A new field that is in none of the lists fails
here, so no engine accepts a field and ignores it."""

import dataclasses
import os

import pytest

from jaxrl_dist.config import SECTIONS, ConfigError, TrainConfig
from jaxrl_dist.config.agents import AgentSection
from jaxrl_dist.config.cli import load_config
from jaxrl_dist.config.engine_sections import ENGINE_SECTIONS
from jaxrl_dist.config.engines import get_engine
from jaxrl_dist.config.sections import leaf_paths
from jaxrl_dist.run.fields import SHELL_FIELDS, field_default
from jaxrl_dist.run.trainer import Trainer

ENGINES = ("sebulba", "anakin")
QUICK = {
    "sebulba": "configs/impala_cartpole.py:quick",
    "anakin": "configs/anakin_ppo_cartpole.py:quick",
}
# A valid value other than the default for each field an engine refuses (with what the
# config's own checks need beside it).
SOLO = "solo"  # `with_fields` builds the one-agent section
NOT_DEFAULT = {
    "anakin.num_seeds": {"anakin.num_seeds": 2},
    "replay.batch_size": {"replay.batch_size": 16},
    "sebulba.num_actor_threads": {"sebulba.num_actor_threads": 2},
    "sebulba.envs_per_actor": {"sebulba.envs_per_actor": 8},
    "sebulba.async_envs": {"sebulba.async_envs": False},
    "sebulba.env_threads_per_actor": {"sebulba.env_threads_per_actor": 2},
    "sebulba.actor_loop": {"sebulba.actor_loop": "xla", "sebulba.async_envs": False},
    "sebulba.env_groups_per_actor": {
        "sebulba.env_groups_per_actor": 2,
        "sebulba.actor_loop": "xla",
        "sebulba.async_envs": False,
    },
    "sebulba.actor_hang_timeout_s": {"sebulba.actor_hang_timeout_s": 30.0},
    "sebulba.env_start_timeout_s": {"sebulba.env_start_timeout_s": 30.0},
    "sebulba.env_thread_affinity_offset": {"sebulba.env_thread_affinity_offset": 0},
    "sebulba.queue_size": {"sebulba.queue_size": 3},
    "sebulba.max_policy_lag": {"sebulba.max_policy_lag": 2},
    "sebulba.actor_max_restarts": {"sebulba.actor_max_restarts": 0},
    "sebulba.actor_restart_window_s": {"sebulba.actor_restart_window_s": 60.0},
    "sebulba.actor_device_ids": {"sebulba.actor_device_ids": (0, 0)},
    "sebulba.sync_collection": {"sebulba.sync_collection": True, "sebulba.async_envs": False},
    "sebulba.fraction_samples": {
        "sebulba.fraction_samples": 0.5,
        "sebulba.sync_collection": True,
        "sebulba.async_envs": False,
        "sebulba.max_policy_lag": 1,
    },
    "sebulba.video_every_evals": {"sebulba.video_every_evals": 2},
    "sebulba.env_epoch_updates": {"sebulba.env_epoch_updates": 50},
    "sebulba.inference.client": {"sebulba.inference.client": "server"},
    # The server's own settings need the server (the local client refuses them).
    "sebulba.inference.batch_size": {
        "sebulba.inference.batch_size": 8,
        "sebulba.inference.client": "server",
    },
    "sebulba.inference.timeout_ms": {
        "sebulba.inference.timeout_ms": 5.0,
        "sebulba.inference.client": "server",
    },
    "sebulba.inference.broadcast_period": {
        "sebulba.inference.broadcast_period": 2,
        "sebulba.inference.client": "server",
    },
    "sebulba.inference.device_ids": {
        "sebulba.inference.device_ids": (0,),
        "sebulba.inference.client": "server",
    },
    "sebulba.agents_per_env": {"sebulba.agents_per_env": 2},
    "sebulba.team_reward": {"sebulba.team_reward": True, "sebulba.agents_per_env": 2},
    "replay.tolerance": {"replay.tolerance": 4.0},
    # Set on the built config (`with_fields`): an agent section is not a command-line value.
    "sebulba.agent_slots": {"agents": SOLO, "sebulba.agent_slots": ("solo",)},
}
BUILT = ("agents", "sebulba.agent_slots")


def with_fields(spec: str, fields: dict):
    """`load_config(spec)` with `fields`: the command-line ones as overrides, `BUILT` ones
    replaced on the built config (the agent section "solo" takes the config's own agent)."""
    config = load_config(spec, **{k: v for k, v in fields.items() if k not in BUILT})
    if "agents" in fields:
        own = {f: getattr(config, f) for f in ("algorithm", "algo", "network", "replay")}
        config = dataclasses.replace(config, agents=(AgentSection("solo", **own),))
    if "sebulba.agent_slots" in fields:
        slots = fields["sebulba.agent_slots"]
        sebulba = dataclasses.replace(config.sebulba, agent_slots=slots)
        config = dataclasses.replace(config, sebulba=sebulba)
    return config


def run_fields() -> list[str]:
    """Every field of a run's config, sections' field by field (`sebulba.inference.client`)."""
    return leaf_paths(TrainConfig)


def refused_by(name: str) -> list[str]:
    """The fields engine `name` refuses: every other engine's section's, and its own list."""
    engine = get_engine(name)
    others = [s for s in ENGINE_SECTIONS if s != engine.section]
    return [f for f in run_fields() if f.split(".")[0] in others] + list(engine.refuses)


def listed_in(table, field: str) -> bool:
    """Whether `table` names `field`, or its whole section."""
    return field in table or field.split(".")[0] in table


@pytest.mark.parametrize("name", ENGINES)
def test_every_field_is_honoured_used_or_refused_exactly_once(name):
    engine = get_engine(name)
    others = {s: "another engine's section" for s in ENGINE_SECTIONS if s != engine.section}
    tables = {
        "shell": SHELL_FIELDS,
        "uses": engine.uses,
        "refuses": engine.refuses,
        "another engine's section": others,
    }
    fields = run_fields()
    for field in fields:
        where = [kind for kind, table in tables.items() if listed_in(table, field)]
        assert len(where) == 1, f"{name}: config.{field} is in {where or 'no list'}"
    names = set(fields) | set(SECTIONS)
    for kind, table in tables.items():
        assert set(table) <= names, f"{name}.{kind} lists no field: {set(table) - names}"
        assert all(isinstance(how, str) and how for how in table.values())
    assert engine.section in engine.uses  # its own section is its to read


@pytest.mark.parametrize(
    ("name", "field"),
    [(name, field) for name in ENGINES for field in refused_by(name)],
)
def test_a_refused_field_stops_the_run_in_one_line_before_anything_is_written(
    name, field, tmp_path
):
    config = with_fields(QUICK[name], NOT_DEFAULT[field])
    workdir = tmp_path / "run"
    with pytest.raises(ConfigError) as e:
        Trainer(config, str(workdir))
    message = str(e.value)
    refused = [f for f in NOT_DEFAULT[field] if f in refused_by(name)]
    assert any(message.startswith(f"config.{f}=") for f in refused), message
    assert f"is not used by config.runtime={name!r}" in message and "\n" not in message
    assert not os.path.exists(workdir)


@pytest.mark.parametrize("name", ENGINES)
def test_fields_at_their_defaults_are_not_refused(name, tmp_path):
    """The same values as the defaults, given explicitly, are accepted."""
    defaults = {f: field_default(TrainConfig(), f) for f in refused_by(name) if f not in BUILT}
    config = load_config(QUICK[name], **defaults)
    Trainer(config, str(tmp_path / "run"))  # builds: the checks passed


def test_deterministic_mode_builds_on_anakin(tmp_path):
    """Anakin's program is deterministic; the mode adds the GPU XLA flags, and none of the
    Sebulba lockstep's needs (sync EnvPools) applies there."""
    config = load_config(QUICK["anakin"], deterministic=True)
    assert Trainer(config, str(tmp_path / "run")).engine.name == "anakin"


@pytest.mark.parametrize(
    ("name", "overrides", "message"),
    [
        ("sebulba", {"replay.capacity": 500}, "config.replay.capacity=500 is not used by"),
        ("anakin", {"replay.n_step": 3}, "config.replay.n_step=3 is not used by"),
    ],
)
def test_a_replay_field_the_data_flow_does_not_read_is_refused(name, overrides, message, tmp_path):
    config = load_config(QUICK[name], **overrides)
    with pytest.raises(ConfigError, match="its data flow reads none of them") as e:
        Trainer(config, str(tmp_path / "run"))
    assert str(e.value).startswith(message) and not os.path.exists(tmp_path / "run")


def test_the_local_client_refuses_the_inference_servers_settings():
    with pytest.raises(
        ConfigError, match=r"config.sebulba.inference.timeout_ms=5.0 is the inference s"
    ):
        load_config(QUICK["sebulba"], **{"sebulba.inference.timeout_ms": 5.0})
