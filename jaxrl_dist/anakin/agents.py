"""Several agents of one run on Anakin (`config.agents`, rbgame's decentralized trainer): one
`Program` per agent in one jitted program, their carries a tuple.

Each agent (a *lane*) has its own learner state, data flow, env streams (the games that seat
it, seen from its side: `config/agents.py`), league and log totals. One update of the run is
one update of every learning agent, in lockstep: each plays its rollout against the other
agents' params as they were at the update's start (`SeatedJaxGame`'s "agent:NAME" seats, fed
through the shared state), then learns from it. So no agent can starve another, the agents'
update counts are equal by construction, and the program stays one pure function (the same
on 1 or N devices, resumed bit for bit). An agent whose learning mask is off keeps its carry
as it started (its params, a warm start's, bit for bit) and plays only in the others' games.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxrl_dist.anakin.program import Carry, Program
from jaxrl_dist.config.agents import AGENT_SEED_STRIDE
from jaxrl_dist.envs.seats import AGENT_ROLE
from jaxrl_dist.types import PyTree


class LaneProgram(NamedTuple):
    """One agent's part of the program."""

    name: str
    program: Program
    learning: bool


class AgentsProgram:
    """Every agent's `Program`; the carry is their `Carry`s in `lanes` order. Same interface
    as `Program` for `Anakin` (`init`, `update_seeds`)."""

    def __init__(self, lanes: list[LaneProgram]):
        self.lanes = lanes

    def _params(self, carries: tuple[Carry, ...]) -> dict[str, PyTree]:
        """Every agent's acting params by role ("agent:NAME"), of one seed's carries."""
        return {
            AGENT_ROLE + lane.name: lane.program.agent.learner.actor_params(c.learner)
            for lane, c in zip(self.lanes, carries, strict=True)
        }

    def init(self, seed: jax.Array, warm: dict[str, PyTree] | None = None) -> tuple[Carry, ...]:
        """Every agent's fresh carry for the run's seed `seed`: agent `i` from seed `seed + i *
        AGENT_SEED_STRIDE` (its view's), with its warm start's params where `warm` has them
        (by name), its games' other agents with their starting params."""
        warm = warm or {}
        seeds = [seed + jnp.uint32(i * AGENT_SEED_STRIDE % 2**32) for i in range(len(self.lanes))]
        # One learner state each, whose params the others' games and leagues start from too.
        learners = [
            lane.program.init_learner(s, warm.get(lane.name))
            for lane, s in zip(self.lanes, seeds, strict=True)
        ]
        params = {
            AGENT_ROLE + lane.name: lane.program.agent.learner.actor_params(learner)
            for lane, learner in zip(self.lanes, learners, strict=True)
        }
        return tuple(
            lane.program.init(s, params, learner=learner)
            for lane, s, learner in zip(self.lanes, seeds, learners, strict=True)
        )

    def update_seeds(self, carries: tuple[Carry, ...]) -> tuple[Carry, ...]:
        """One update of every learning agent (every seed), each against the others' params
        at the update's start."""
        params = jax.vmap(self._params)(carries)  # leaves [S, ...]
        out = []
        for lane, carry in zip(self.lanes, carries, strict=True):
            if lane.learning:
                carry = carry._replace(shared=lane.program.env.with_agents(carry.shared, params))
                carry = lane.program.update_seeds(carry)
            out.append(carry)
        return self._snapshot_agents(tuple(out))

    def _snapshot_agents(self, carries: tuple[Carry, ...]) -> tuple[Carry, ...]:
        """A league across agents: each agent whose games play others' snapshots takes their
        params after this update (a snapshot when due), as their own pools do."""
        followers = [
            getattr(lane.program.env, "follows_agents", False) and lane.learning
            for lane in self.lanes
        ]
        if not any(followers):
            return carries
        params = jax.vmap(self._params)(carries)
        out = []
        for lane, carry, follows in zip(self.lanes, carries, followers, strict=True):
            if follows:
                env = lane.program.env
                shared = jax.vmap(env.after_agents)(env.with_agents(carry.shared, params))
                carry = carry._replace(shared=shared)
            out.append(carry)
        return tuple(out)
