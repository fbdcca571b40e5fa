"""The agent registry: name -> (config class, factory, check, data flow). The trainer looks
agents up here; `register` adds one (from research code or a test) without editing the package."""

from __future__ import annotations

from typing import Any

from jaxrl_dist.agents import dqn, impala, ppo, r2d2, sac, td3
from jaxrl_dist.agents.base import Agent, AgentEntry, LearnerState, RunShape
from jaxrl_dist.agents.intrinsic import IntrinsicConfig, make_rnd
from jaxrl_dist.envs import EnvSpec
from jaxrl_dist.networks import NetworkConfig

REGISTRY: dict[str, AgentEntry] = {
    "impala": AgentEntry(impala.ImpalaConfig, impala.make_impala, intrinsic=True),
    "ppo": AgentEntry(ppo.PPOConfig, ppo.make_ppo, ppo.check_ppo, intrinsic=True),
    "rainbow": AgentEntry(
        dqn.RainbowConfig, dqn.make_rainbow, dqn.check_rainbow, data="prioritized"
    ),
    "r2d2": AgentEntry(r2d2.R2D2Config, r2d2.make_r2d2, r2d2.check_r2d2, data="sequences"),
    "sac": AgentEntry(sac.SACConfig, sac.make_sac, sac.check_sac, data="prioritized"),
    "td3": AgentEntry(td3.TD3Config, td3.make_td3, td3.check_td3, data="prioritized"),
}


def get(name: str) -> AgentEntry:
    if name not in REGISTRY:
        raise KeyError(name)
    return REGISTRY[name]


def make_agent(
    name: str,
    algo: Any,
    network: NetworkConfig,
    spec: EnvSpec,
    shape: RunShape,
    intrinsic: IntrinsicConfig | None = None,
    batch_size: int = 1,
) -> Agent:
    """Agent `name` built as the trainer builds it: with `intrinsic` on, RND for learner
    batches of `batch_size` envs beside it. Raises ValueError (one line) for an intrinsic
    section on an agent that cannot learn it."""
    entry = get(name)
    if intrinsic is None or not intrinsic.enabled:
        return entry.make(algo, network, spec, shape)
    if not entry.intrinsic:
        able = sorted(n for n, e in REGISTRY.items() if e.intrinsic)
        raise ValueError(
            f"config.intrinsic.method={intrinsic.method!r} needs an agent with a value head to "
            f"learn it ({', '.join(able)}); algorithm {name!r} has none: set "
            "config.intrinsic.method='none' or choose one of those"
        )
    rnd = make_rnd(intrinsic, network, spec, batch_size)
    return entry.make(algo, network, spec, shape, intrinsic=rnd)


def register(name: str, entry: AgentEntry) -> None:
    """Makes `config.algorithm=name` build `entry`'s agent (replacing an entry of that name)."""
    REGISTRY[name] = entry


__all__ = ["REGISTRY", "Agent", "AgentEntry", "LearnerState", "get", "make_agent", "register"]
