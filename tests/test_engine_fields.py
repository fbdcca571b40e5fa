"""Every run field, on every engine: honoured by the run shell, used by the engine, or refused
by it in one line before anything is written. A new field that is in none of the lists fails
here, so no engine accepts a field and ignores it."""

import dataclasses
import os

import pytest

from jaxrl_dist.config import SECTIONS, ConfigError, TrainConfig
from jaxrl_dist.config.agents import AgentSection
from jaxrl_dist.config.cli import load_config
from jaxrl_dist.config.engines import get_engine
from jaxrl_dist.run.fields import SHELL_FIELDS
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
    "num_seeds": {"num_seeds": 2},
    "replay.batch_size": {"replay.batch_size": 16},
    "num_actor_threads": {"num_actor_threads": 2},
    "envs_per_actor": {"envs_per_actor": 8},
    "async_envs": {"async_envs": False},
    "env_threads_per_actor": {"env_threads_per_actor": 2},
    "actor_loop": {"actor_loop": "xla", "async_envs": False},
    "env_groups_per_actor": {"env_groups_per_actor": 2, "actor_loop": "xla", "async_envs": False},
    "actor_hang_timeout_s": {"actor_hang_timeout_s": 30.0},
    "env_start_timeout_s": {"env_start_timeout_s": 30.0},
    "env_thread_affinity_offset": {"env_thread_affinity_offset": 0},
    "queue_size": {"queue_size": 3},
    "max_policy_lag": {"max_policy_lag": 2},
    "actor_max_restarts": {"actor_max_restarts": 0},
    "actor_restart_window_s": {"actor_restart_window_s": 60.0},
    "actor_device_ids": {"actor_device_ids": (0, 0)},
    "sync_collection": {"sync_collection": True, "async_envs": False},
    "fraction_samples": {
        "fraction_samples": 0.5,
        "sync_collection": True,
        "async_envs": False,
        "max_policy_lag": 1,
    },
    "video_every_evals": {"video_every_evals": 2},
    "env_epoch_updates": {"env_epoch_updates": 50},
    "inference.client": {"inference.client": "server"},
    # The server's own settings need the server (the local client refuses them).
    "inference.batch_size": {"inference.batch_size": 8, "inference.client": "server"},
    "inference.timeout_ms": {"inference.timeout_ms": 5.0, "inference.client": "server"},
    "inference.broadcast_period": {"inference.broadcast_period": 2, "inference.client": "server"},
    "inference.device_ids": {"inference.device_ids": (0,), "inference.client": "server"},
    "agents_per_env": {"agents_per_env": 2},
    "team_reward": {"team_reward": True},
    "replay.tolerance": {"replay.tolerance": 4.0},
    # Set on the built config (`with_fields`): an agent section is not a command-line value.
    "agents": {"agents": SOLO},
    "learning_mask": {"agents": SOLO, "learning_mask": (True,)},
    "exploration_mask": {"agents": SOLO, "exploration_mask": (False,)},
    "agent_slots": {"agents": SOLO, "agent_slots": ("solo",)},
}
BUILT = ("agents", "learning_mask", "exploration_mask", "agent_slots")


def with_fields(spec: str, fields: dict):
    """`load_config(spec)` with `fields`: the command-line ones as overrides, `BUILT` ones
    replaced on the built config (the agent section "solo" takes the config's own agent)."""
    config = load_config(spec, **{k: v for k, v in fields.items() if k not in BUILT})
    built = {k: v for k, v in fields.items() if k in BUILT}
    if "agents" in built:
        own = {f: getattr(config, f) for f in ("algorithm", "algo", "network", "replay")}
        built["agents"] = (AgentSection("solo", **own),)
    return dataclasses.replace(config, **built)


def run_fields() -> list[str]:
    """Every field of a run's config: `TrainConfig`'s, each section's as `section.field`."""
    fields = []
    for field in dataclasses.fields(TrainConfig):
        section = SECTIONS.get(field.name)
        if section is None:
            fields.append(field.name)
        else:
            fields.extend(f"{field.name}.{f.name}" for f in dataclasses.fields(section))
    return fields


def listed_in(table, field: str) -> bool:
    """Whether `table` names `field`, or its whole section."""
    return field in table or field.split(".")[0] in table


@pytest.mark.parametrize("name", ENGINES)
def test_every_field_is_honoured_used_or_refused_exactly_once(name):
    engine = get_engine(name)
    tables = {"shell": SHELL_FIELDS, "uses": engine.uses, "refuses": engine.refuses}
    fields = run_fields()
    for field in fields:
        where = [kind for kind, table in tables.items() if listed_in(table, field)]
        assert len(where) == 1, f"{name}: config.{field} is in {where or 'no list'}"
    names = set(fields) | set(SECTIONS)
    for kind, table in tables.items():
        assert set(table) <= names, f"{name}.{kind} lists no field: {set(table) - names}"
        assert all(isinstance(how, str) and how for how in table.values())


@pytest.mark.parametrize(
    ("name", "field"),
    [(name, field) for name in ENGINES for field in get_engine(name).refuses],
)
def test_a_refused_field_stops_the_run_in_one_line_before_anything_is_written(
    name, field, tmp_path
):
    config = with_fields(QUICK[name], NOT_DEFAULT[field])
    workdir = tmp_path / "run"
    with pytest.raises(ConfigError) as e:
        Trainer(config, str(workdir))
    message = str(e.value)
    refused = [f for f in NOT_DEFAULT[field] if f in get_engine(name).refuses]
    assert any(message.startswith(f"config.{f}=") for f in refused), message
    assert f"is not used by config.runtime={name!r}" in message and "\n" not in message
    assert not os.path.exists(workdir)


@pytest.mark.parametrize("name", ENGINES)
def test_fields_at_their_defaults_are_not_refused(name, tmp_path):
    """The same values as the defaults, given explicitly, are accepted."""
    engine = get_engine(name)
    defaults = {
        field: getattr(TrainConfig(), field) for field in engine.refuses if "." not in field
    }
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
    with pytest.raises(ConfigError, match=r"config.inference.timeout_ms=5.0 is the inference s"):
        load_config(QUICK["sebulba"], **{"inference.timeout_ms": 5.0})
