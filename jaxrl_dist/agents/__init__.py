"""The agent registry: name -> (config class, factory, check, data flow). The trainer looks
agents up here; `register` adds one (from research code or a test) without editing the package."""

from __future__ import annotations

from jaxrl_dist.agents import dqn, impala, ppo, r2d2
from jaxrl_dist.agents.base import Agent, AgentEntry, LearnerState

REGISTRY: dict[str, AgentEntry] = {
    "impala": AgentEntry(impala.ImpalaConfig, impala.make_impala),
    "ppo": AgentEntry(ppo.PPOConfig, ppo.make_ppo, ppo.check_ppo),
    "rainbow": AgentEntry(
        dqn.RainbowConfig, dqn.make_rainbow, dqn.check_rainbow, data="prioritized"
    ),
    "r2d2": AgentEntry(r2d2.R2D2Config, r2d2.make_r2d2, r2d2.check_r2d2, data="sequences"),
}


def get(name: str) -> AgentEntry:
    if name not in REGISTRY:
        raise KeyError(name)
    return REGISTRY[name]


def register(name: str, entry: AgentEntry) -> None:
    """Makes `config.algorithm=name` build `entry`'s agent (replacing an entry of that name)."""
    REGISTRY[name] = entry


__all__ = ["REGISTRY", "Agent", "AgentEntry", "LearnerState", "get", "register"]
