"""Algorithm registry: name -> (config class, factory). The trainer looks algorithms up here."""

from __future__ import annotations

from jaxrl_dist.agents import impala, ppo
from jaxrl_dist.agents.base import Algorithm, AlgorithmEntry, LearnerState

REGISTRY: dict[str, AlgorithmEntry] = {
    "impala": AlgorithmEntry(impala.ImpalaConfig, impala.make_impala),
    "ppo": AlgorithmEntry(ppo.PPOConfig, ppo.make_ppo, ppo.check_ppo),
}


def get(name: str) -> AlgorithmEntry:
    if name not in REGISTRY:
        raise KeyError(name)
    return REGISTRY[name]


__all__ = ["REGISTRY", "Algorithm", "AlgorithmEntry", "LearnerState", "get"]
