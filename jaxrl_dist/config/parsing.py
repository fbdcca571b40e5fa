"""Parsing `--config.field=value` strings by the declared field types, and building the typed,
checked config from a nested dict."""

from __future__ import annotations

import ast
import dataclasses
import difflib
import math
import types
import typing
from collections.abc import Callable
from typing import Any

from jaxrl_dist.config.agents import AGENT_FIELDS, AGENT_SECTIONS, AgentSection, build_agents
from jaxrl_dist.config.errors import ConfigError
from jaxrl_dist.config.moved import move_flat_fields, new_path
from jaxrl_dist.config.train import SECTIONS, TrainConfig

# Dict fields whose keys are set one at a time (--config.env_kwargs.KEY=value), by value type.
DICT_FIELDS = {"env_kwargs": Any, "eval_env_kwargs": Any, "schedules": str}


def _field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _parse_value(text: str, hint: Any, field: str) -> Any:
    """Parses a command-line string into the type `hint` declares."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if text.lower() in ("none", "null", ""):
            if type(None) in args:
                return None
        inner = [a for a in args if a is not type(None)]
        return _parse_value(text, inner[0], field)
    if hint is bool:
        if text.lower() in ("true", "1", "yes"):
            return True
        if text.lower() in ("false", "0", "no"):
            return False
        raise ConfigError(f"config.{field}={text!r} is not a bool; use true or false")
    if hint in (int, float, str):
        if hint is str:
            return text
        try:
            value = ast.literal_eval(text.replace("_", "") if hint is int else text)
        except (ValueError, SyntaxError):
            value = text
        if hint is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if type(value) is not hint:
            raise ConfigError(
                f"config.{field}={text!r} is not {'an int' if hint is int else 'a float'}; "
                f"give a number, e.g. config.{field}={'3' if hint is int else '3e-4'}"
            )
        return value
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise ConfigError(f"config.{field}={text!r} is not a Python literal") from None
    if origin is tuple:
        value = tuple(value) if isinstance(value, list | tuple) else (value,)
    return value


def _check_type(value: Any, hint: Any, field: str) -> Any:
    """Checks (and gently coerces int -> float, list -> tuple) a value against a type hint."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _check_type(value, inner[0], field)
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"config.{field}={value!r} must be a finite number")
    if hint is float and isinstance(value, float):
        return value
    if origin is tuple or hint is tuple:
        if not isinstance(value, list | tuple):
            raise ConfigError(f"config.{field}={value!r} must be a tuple, e.g. (64, 64)")
        elem = args[0] if args else None
        return tuple(_check_type(v, elem, field) if elem else v for v in value)
    expected = origin or hint
    if expected is Any or expected is typing.Any:
        return value
    if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
        raise ConfigError(
            f"config.{field}={value!r} has type {type(value).__name__}, expected "
            f"{getattr(expected, '__name__', expected)}"
        )
    return value


def _unknown(field: str, known: list[str]) -> ConfigError:
    leaf = field.rsplit(".", 1)[-1]
    close = difflib.get_close_matches(leaf, known, n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return ConfigError(f"config.{field} is not a config field{hint}; see the config file's fields")


def _build_dataclass(cls: type, values: dict, prefix: str) -> Any:
    hints = _field_types(cls)
    kwargs = {}
    for key, value in values.items():
        field = f"{prefix}{key}"
        if key not in hints:
            raise _unknown(field, list(hints))
        if dataclasses.is_dataclass(hints[key]) and isinstance(value, dict):  # a nested section
            kwargs[key] = _build_dataclass(hints[key], value, f"{field}.")
            continue
        kwargs[key] = _check_type(value, hints[key], field)
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except ValueError as e:  # sub-configs raise plain ValueError with a one-line message
        raise ConfigError(str(e).splitlines()[0]) from None


def apply_overrides(
    raw: dict,
    overrides: dict[str, str],
    algo_config_cls: type,
    algo_config_of: Callable[[str], type] | None = None,
) -> dict:
    """Applies `{"a.b": "value"}` overrides to a nested dict, typed by the dataclass fields;
    `agents.NAME.field[.sub]` sets one agent's (`algo_config_of(algorithm)` types its algo)."""
    # A file's old flat names first, so an override of the new name lands on top of them.
    raw = move_flat_fields(raw)
    raw = {k: (dict(v) if isinstance(v, dict) else v) for k, v in raw.items()}
    group_classes = {**SECTIONS, "algo": algo_config_cls}
    top_hints = _field_types(TrainConfig)
    for dotted, text in overrides.items():
        dotted = new_path(dotted) or dotted  # an old flat name (`config/moved.py`)
        parts = dotted.split(".")
        if parts[0] == "agents" and len(parts) > 2:
            raw["agents"] = _agent_override(raw.get("agents"), parts, text, algo_config_of)
            continue
        if parts[0] in DICT_FIELDS and len(parts) == 2:  # one key of a dict field
            value = _parse_value(text, DICT_FIELDS[parts[0]], dotted)
            if raw.get(parts[0]) is None:  # eval_env_kwargs' None: the training env's
                raw[parts[0]] = {}
            raw[parts[0]][parts[1]] = value
            continue
        if parts[0] in group_classes and len(parts) >= 2:
            _set_in_section(raw, group_classes[parts[0]], parts, text, dotted)
            continue
        if len(parts) != 1 or parts[0] not in top_hints or parts[0] in group_classes:
            raise _unknown(dotted, list(top_hints))
        raw[parts[0]] = _parse_value(text, top_hints[parts[0]], dotted)
    return raw


def _set_in_section(raw: dict, cls: type, parts: list[str], text: str, dotted: str) -> None:
    """Sets `section[.sub...].field` (`parts`) in `raw`'s nested dicts, typed by `cls`'s."""
    target = raw.setdefault(parts[0], {})
    if not isinstance(target, dict):
        target = raw[parts[0]] = dict(target)
    for name in parts[1:-1]:
        hints = _field_types(cls)
        if name not in hints or not dataclasses.is_dataclass(hints[name]):
            raise _unknown(dotted, list(hints))
        cls = hints[name]
        target[name] = dict(target.get(name) or {})
        target = target[name]
    hints = _field_types(cls)
    if parts[-1] not in hints or dataclasses.is_dataclass(hints[parts[-1]]):
        raise _unknown(dotted, list(hints))
    target[parts[-1]] = _parse_value(text, hints[parts[-1]], dotted)


def _agent_override(
    agents: Any, parts: list[str], text: str, algo_config_of: Callable[[str], type] | None
) -> tuple:
    """`config.agents` with `agents.NAME.field[.sub]=text` applied to agent NAME's dict."""
    dotted = ".".join(parts)
    agents = [dict(a) for a in agents or ()]
    mine = [a for a in agents if a.get("name") == parts[1]]
    if not mine:
        names = ", ".join(str(a.get("name")) for a in agents) or "none"
        raise ConfigError(f"config.{dotted}: no agent {parts[1]!r} in config.agents ({names})")
    agent, field = mine[0], parts[2]
    classes = dict(AGENT_SECTIONS)
    if algo_config_of is not None:
        try:
            classes["algo"] = algo_config_of(agent.get("algorithm", AgentSection.algorithm))
        except ConfigError as e:
            raise ConfigError(str(e).replace("agents.NAME.", f"agents.{parts[1]}.")) from None
    if len(parts) == 4 and field in classes:
        hints = _field_types(classes[field])
        if parts[3] not in hints:
            raise _unknown(dotted, list(hints))
        agent[field] = {
            **(agent.get(field) or {}),
            parts[3]: _parse_value(text, hints[parts[3]], dotted),
        }
        return tuple(agents)
    hints = {k: v for k, v in _field_types(AgentSection).items() if k not in classes}
    if len(parts) == 4 and field == "schedules":
        agent[field] = {**(agent.get(field) or {}), parts[3]: text}
        return tuple(agents)
    if len(parts) != 3 or field not in hints:
        raise _unknown(dotted, list(hints) + list(classes))
    agent[field] = _parse_value(text, hints[field], dotted)
    return tuple(agents)


def build_config(
    raw: dict,
    algo_config_cls: type,
    algo_config_of: Callable[[str], type] | None = None,
    saved: bool = False,
) -> TrainConfig:
    """Validates a nested dict into a `TrainConfig` (raises `ConfigError`); `config.agents`'
    algos are built with `algo_config_of(algorithm)`'s classes, and the first agent's fields
    fill the top-level ones (which a config with agents must leave unset). Old flat names move
    into their sections (`config/moved.py`), with a hint unless the dict is a `saved` run's."""
    raw = move_flat_fields(raw, tell=not saved)
    agents = _agents(raw, algo_config_of)
    sections = {
        name: _build_dataclass(cls, dict(raw.pop(name, {}) or {}), f"{name}.")
        for name, cls in {**SECTIONS, "algo": algo_config_cls}.items()
    }
    if agents:  # the first agent's fields in the top-level places
        top = {f: getattr(agents[0], f) for f in AGENT_FIELDS if f != "batch_size"}
        raw, sections = {**raw, **top, "agents": agents}, {**sections, **top}
    return _build_dataclass(TrainConfig, {**raw, **sections}, "")


def _agents(raw: dict, algo_config_of: Callable[[str], type] | None) -> tuple:
    """`raw["agents"]` built (popped from `raw`); a top-level agent field beside it refused."""
    agents = raw.pop("agents", None)
    if not agents:
        return ()
    given = [f for f in AGENT_FIELDS if f in raw and f != "batch_size"]
    if given:
        raise ConfigError(
            f"config.{given[0]} is set beside config.agents; give each agent its own "
            f"(config.agents.NAME.{given[0]}=...)"
        )
    if algo_config_of is None:
        raise ConfigError("config.agents needs the algorithm registry: use load_config")
    return build_agents(agents, algo_config_of, _build_dataclass)


def jsonable(value: Any) -> Any:
    """Dataclasses, tuples and dicts as plain JSON values."""
    if dataclasses.is_dataclass(value):
        value = dataclasses.asdict(value)
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value
