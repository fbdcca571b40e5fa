"""A policy's description: what every checkpoint's `meta["policy"]` holds to rebuild its acting
network (the algorithm, its config and the network config, the env spec, the env id and options,
a format version), written by `describe_policy` and read back by `build_agent`.

Errors are `ValueError` with one line naming what is wrong and the fix.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from jaxrl_dist import agents
from jaxrl_dist.agents.base import Agent, RunShape
from jaxrl_dist.checkpoints.store import restructure_like, tree_difference
from jaxrl_dist.config import ConfigError, TrainConfig, build_config, jsonable
from jaxrl_dist.data import flows
from jaxrl_dist.envs import EnvSpec, env_spec
from jaxrl_dist.networks import TORSOS
from jaxrl_dist.networks.cores import CORES, core_factory
from jaxrl_dist.networks.heads import SHIPPED_HEADS, head_factory
from jaxrl_dist.networks.torsos import torso_factory

POLICY_FORMAT = 2  # bump when describe_policy's dict changes in a way old readers cannot read
# What a description needs of its reader: 2 with an intrinsic value head (`intrinsic`), which a
# reader of format 1 would leave out of the network it builds; else 1, which every reader reads.
INTRINSIC_FORMAT = 2


def describe_policy(config: TrainConfig, spec: EnvSpec) -> dict[str, Any]:
    """What rebuilds the acting network of a run, as plain JSON (kept in each checkpoint's meta).

    `run_shape` is stored because the agent's `make` takes it (for schedules; acting ignores it).
    """
    return {
        "format": INTRINSIC_FORMAT if config.intrinsic.enabled else 1,
        "algorithm": config.algorithm,
        "algo": jsonable(config.algo),
        "network": jsonable(config.network),
        "env_id": config.env_id,
        "env_kwargs": jsonable(config.env_kwargs),
        "env_spec": spec_to_json(spec),
        "seats": jsonable(config.seats),
        **({"intrinsic": jsonable(config.intrinsic)} if config.intrinsic.enabled else {}),
        "run_shape": [
            config.total_env_steps,
            flows.get(agents.get(config.algorithm).data).env_steps_per_update(config),
        ],
    }


def agent_meta(meta: dict[str, Any], step: int, agent: str | None) -> dict[str, Any]:
    """`meta` with agent `agent`'s policy description as its "policy" (a run of several
    agents keeps each one's in `meta["policies"]`); ValueError naming the agents when `agent`
    is not one of them, or is given for a one-agent run."""
    policies = meta.get("policies")
    if policies is None:
        if agent is not None:
            raise ValueError(f"step {step} holds one agent; leave the agent (--agent) out")
        return meta
    if agent not in policies:
        given = f"has no agent {agent!r}" if agent else "holds several agents"
        raise ValueError(
            f"step {step} {given} ({', '.join(policies)}); name one: load_policy(run, "
            "agent=NAME), scripts/evaluate.py RUN --agent NAME"
        )
    return {**meta, "policy": policies[agent]}


def policy_description(meta: dict[str, Any], step: int) -> dict[str, Any]:
    """`meta["policy"]`, or for older checkpoints one built from `meta["config"]`."""
    description = meta.get("policy")
    if description is None:
        if "config" not in meta:
            raise ValueError(
                f"step {step} has neither a policy description nor a run config in its meta; "
                "it was not saved by jaxrl_dist's trainer"
            )
        config = _config_from_json(meta["config"], step)
        return describe_policy(config, env_spec(config.env_id, config.env_kwargs))
    if description.get("format", 0) > POLICY_FORMAT:
        raise ValueError(
            f"step {step} holds a policy of format {description['format']} (this jaxrl_dist "
            f"reads up to {POLICY_FORMAT}); upgrade jaxrl_dist"
        )
    return description


def build_agent(description: dict[str, Any]) -> Agent:
    """The `Agent` a `describe_policy` dict names, built as the trainer built it."""
    name = description["algorithm"]
    if name not in agents.REGISTRY:
        raise ValueError(
            f"the checkpoint's algorithm {name!r} is not registered in this jaxrl_dist "
            f"({sorted(agents.REGISTRY)})"
        )
    _check_user_parts(description["network"])
    raw = {key: description[key] for key in ("algorithm", "env_id", "env_kwargs")}
    # An intrinsic value head is in the params (older descriptions have none).
    raw["intrinsic"] = description.get("intrinsic", {})
    # build_config checks the values and turns JSON lists back into the tuples the configs hold.
    config = _config_from_json(
        {**raw, "network": description["network"], "algo": description["algo"]}, None
    )
    spec = spec_from_json(description["env_spec"])
    # Older descriptions stored the update count; schedules do not change how a policy acts.
    shape = RunShape(*description.get("run_shape", (description.get("num_updates", 1), 1.0)))
    return agents.make_agent(name, config.algo, config.network, spec, shape, config.intrinsic)


def _check_user_parts(network: dict) -> None:
    """ValueError (one line) when a torso, core or head of the user's that the policy names cannot
    be built here (its module does not import, or its name is not registered in this process)."""
    for part, shipped, lookup in (
        ("torso", TORSOS, torso_factory),
        ("core", CORES, core_factory),
        ("head", SHIPPED_HEADS, head_factory),
    ):
        name = network.get(part, shipped[0])
        if name in shipped:
            continue
        try:
            lookup(name)
        except ValueError as e:
            if ":" in name:  # MODULE:FACTORY that does not import here
                raise ValueError(
                    f"the policy's network cannot be built in this process: {e}"
                ) from None
            raise ValueError(
                f"the policy's network.{part}={name!r} is a name registered in the process "
                f"that trained it, not in this one: register_{part}({name!r}, factory) before "
                f"load_policy (scripts/evaluate.py rebuilds only 'MODULE:FACTORY' {part}s)"
            ) from None


def _config_from_json(raw: dict[str, Any], step: int | None) -> TrainConfig:
    name = raw.get("algorithm", "impala")
    if name not in agents.REGISTRY:
        raise ValueError(f"the checkpoint's algorithm {name!r} is not registered in jaxrl_dist")
    try:
        return build_config(raw, agents.get(name).config_cls, saved=True)
    except ConfigError as e:
        where = "its config" if step is None else f"step {step}'s config"
        raise ValueError(
            f"{where} does not fit this version of jaxrl_dist ({e}); use the version that "
            "trained it"
        ) from None


def fit_params(params: Any, agent: Agent, what: str, network: str = "its description") -> Any:
    """Restored params (Orbax gives NamedTuples back as dicts) in the tree structure the
    agent's functions expect, after checking every leaf's shape and dtype."""
    shapes = agent.params_shapes()
    problem = tree_difference(params, shapes)
    if problem:
        raise ValueError(f"{what} do not fit the network {network} builds ({problem})")
    return restructure_like(params, shapes)


def spec_to_json(spec: EnvSpec) -> dict[str, Any]:
    return {
        "obs_shape": list(spec.obs_shape),
        "obs_dtype": np.dtype(spec.obs_dtype).name,
        "num_actions": int(spec.num_actions),
        "action_dim": int(spec.action_dim),
        "action_low": [float(x) for x in spec.action_low],
        "action_high": [float(x) for x in spec.action_high],
        "num_players": int(spec.num_players),
        "num_agents": int(spec.num_agents),
    }


def spec_from_json(raw: dict[str, Any]) -> EnvSpec:
    return EnvSpec(
        obs_shape=tuple(raw["obs_shape"]),
        obs_dtype=np.dtype(raw["obs_dtype"]),
        num_actions=raw["num_actions"],
        action_dim=raw["action_dim"],
        action_low=tuple(raw["action_low"]),
        action_high=tuple(raw["action_high"]),
        num_players=raw.get("num_players", 1),
        num_agents=raw.get("num_agents", 1),
    )
