"""What `preflight.prepare` hands the engine: the env's spec, the device split and every agent's
lane, checked before anything is written (`Engine.__init__` takes it)."""

from __future__ import annotations

import dataclasses
from typing import Any

from jaxrl_dist.agents.base import Agent
from jaxrl_dist.config.agents import AgentView
from jaxrl_dist.data import DataFlow
from jaxrl_dist.envs import EnvSpec
from jaxrl_dist.learning.mesh import Devices


@dataclasses.dataclass(frozen=True)
class Prepared:
    """What the checks produced: the env's spec, the device split, and every agent's lane (a
    one-agent run's: one), in `config.agents` order."""

    spec: EnvSpec
    devices: Devices
    lanes: tuple[PreparedLane, ...]
    notes: tuple[str, ...] = ()  # warm starts that passed over damaged steps (the summary's)


@dataclasses.dataclass(frozen=True)
class PreparedLane:
    """One agent of the run (`config/agents.py`): its view, its agent's two halves, the data
    flow that feeds its learner, and its warm-start params (host arrays) if its
    `warm_start` names a run."""

    view: AgentView
    agent: Agent
    flow: DataFlow
    warm_params: Any = None
    note: str | None = None  # its warm start passed over damaged steps (`warm_params`)
