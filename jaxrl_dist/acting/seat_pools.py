"""The params behind a run's snapshot roles (`config.seats`): `SeatPools` holds a process's
opponent pools (its own "pool" and "frozen", and in an agent's view of several the other agents'
"pool:NAME" / "frozen:NAME": a league across agents) and makes each actor's players of them;
`seated_roles` names the roles of the seats a run plays."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import jax
import numpy as np

from jaxrl_dist.acting.opponent_pool import OpponentPool, PoolPlayer, role_arrays
from jaxrl_dist.acting.params_store import ActingRound
from jaxrl_dist.acting.row_policy import RowPolicy
from jaxrl_dist.agents.base import ActorCore
from jaxrl_dist.data import snapshot as npz
from jaxrl_dist.envs.seats import FROZEN_ROLE, POOL_ROLE, SNAPSHOT_ROLES, agent_snapshot
from jaxrl_dist.types import PyTree, local_replica


class SeatPlan(Protocol):
    """What the seats' pools and roles read of a run's seats (`config.seats`, a `SeatsConfig`,
    satisfies it): actors take these values, not the config's section."""

    pool_capacity: int
    pool_every_updates: int
    pool_sampling: str
    pool_pfsp_exponent: float

    def roles(self, num_games: int) -> list[tuple[str, ...]]: ...

    def snapshot_roles(self) -> set[str]: ...

    def greedy_seat(self, seat: int) -> bool: ...


def snapshot_policy(
    core: ActorCore, device: jax.Device, num_games: int, greedy: bool, key: jax.Array
) -> RowPolicy:
    """A snapshot's policy over `num_games` games on `device`: the agent's masked greedy or
    sampled action, each game with its own memory and key stream (`RowPolicy`)."""
    return RowPolicy(core, num_games, greedy, key, device)


class SeatPools:
    """The params behind a run's snapshot roles (`config.seats`): the opponent pool ("pool",
    a snapshot every `pool_every_updates` updates) and the policy the run started with
    ("frozen", one snapshot never replaced); in an agent's view of several, the same of the
    other agents it plays ("pool:NAME", "frozen:NAME": a league across agents), their snapshots
    taken on their own updates, this agent's record against each kept here (its own PFSP).
    One per process: its actors' players sample and record into it; each process saves its own
    (the same snapshots, its own records)."""

    def __init__(self, seats: SeatPlan, seed: int, epoch_updates: int | None = None):
        """`epoch_updates`: deterministic mode's env epochs (the pools draw by round,
        `OpponentPool.lockstep`); None: actors draw as their games start."""
        roles = seats.snapshot_roles()
        self.pools: dict[str, OpponentPool] = {}
        if POOL_ROLE in roles:
            self.pools[POOL_ROLE] = OpponentPool(
                seats.pool_capacity, seats.pool_sampling, seats.pool_pfsp_exponent, seed
            )
        if FROZEN_ROLE in roles:
            self.pools[FROZEN_ROLE] = OpponentPool(1, "uniform", seed=seed + 1)
        for i, role in enumerate(sorted(r for r in roles if agent_snapshot(r))):
            if agent_snapshot(role)[0] == POOL_ROLE:
                pool = OpponentPool(
                    seats.pool_capacity, seats.pool_sampling, seats.pool_pfsp_exponent, seed + 2 + i
                )
            else:
                pool = OpponentPool(1, "uniform", seed=seed + 2 + i)
            self.pools[role] = pool
        self._every = seats.pool_every_updates
        if epoch_updates is not None:
            for role, pool in self.pools.items():
                pool.lockstep(epoch_updates, fixed=FROZEN_ROLE in (role, role.partition(":")[0]))

    def __bool__(self) -> bool:
        return bool(self.pools)

    def agents(self) -> set[str]:
        """The other agents whose snapshots these pools hold."""
        return {agent_snapshot(role)[1] for role in self.pools if agent_snapshot(role)}

    def start(self, params: PyTree, update: int, agent: str = "") -> None:
        """A fresh run: the first snapshot of every pool of the agent's own (`agent` = ""), or
        of other agent `agent`'s, is its starting `params` (taken at its update `update`)."""
        for role, pool in self.pools.items():
            if _owner(role) == agent:
                pool.add(params, update)

    def offer(self, params: PyTree, update: int, agent: str = "", round_: int = 0) -> None:
        """After the agent's (or other agent `agent`'s) update `update`: its opponent pool
        copies `params` (this process's replica) when a snapshot is due (drawn from that
        agent's next lockstep round `round_` on)."""
        role = f"{POOL_ROLE}:{agent}" if agent else POOL_ROLE
        if role in self.pools and update % self._every == 0:
            self.pools[role].add(local_replica(params), update, round_)

    def reached(self, round_: int, agent: str = "") -> None:
        """Lockstep mode: the agent (or other agent `agent`) acts its round `round_` now, every
        snapshot drawn from it on is in its pools (a frozen start's never changes)."""
        for role, pool in self.pools.items():
            if _owner(role) == agent:
                pool.reached(round_)

    def to_bytes(self, before_round: int | None = None) -> bytes:
        """Every pool's arrays, the lockstep records of the rounds before `before_round`."""
        arrays = {}
        for role, pool in self.pools.items():
            arrays.update({f"{role}/{k}": v for k, v in pool.to_arrays(before_round).items()})
        return npz.to_bytes(arrays)

    def restore_bytes(self, saved: np.ndarray, template: PyTree, agent: str = "") -> None:
        """Takes back `to_bytes`' pools of the agent's own (`agent` = "") or of other agent
        `agent`'s; `template`: that agent's actor params."""
        arrays = npz.from_bytes(saved)
        for role, pool in self.pools.items():
            if _owner(role) != agent:
                continue
            mine = role_arrays(arrays, role)
            if not mine:
                raise ValueError(f"the checkpoint holds no {role!r} pool")
            pool.restore_arrays(mine, template)

    def players(
        self,
        core: ActorCore,
        device: jax.Device,
        num_games: int,
        key: jax.Array,
        at: ActingRound | None = None,
    ) -> dict[str, PoolPlayer]:
        """One actor's `{name: PoolPlayer}` for every name `seated_roles` may give a snapshot
        role of the agent's own ("pool", "pool:greedy", ...), acting on `device` over its
        `num_games` games, each with its own key stream from `key` (a lockstep actor's, `at`,
        drawing with a generator of its own from it)."""
        own = [role for role in self.pools if not _owner(role)]
        names = [(role, suffix) for role in own for suffix in ("", GREEDY)]
        return {
            role + suffix: PoolPlayer(
                self.pools[role],
                snapshot_policy(core, device, num_games, bool(suffix), k),
                _to(device),
                at,
                _draws(k),
            )
            for (role, suffix), k in zip(names, jax.random.split(key, len(names)), strict=True)
        }

    def agent_players(
        self,
        others: dict[str, Any],
        device: jax.Device,
        num_games: int,
        key: jax.Array,
        at: ActingRound | None = None,
    ) -> dict[str, PoolPlayer]:
        """One actor's `{role: PoolPlayer}` of the other agents' snapshot roles ("pool:NAME",
        ...), each acting with that agent's actor half (`others[NAME].core`), sampling as
        that agent's own snapshots do whatever its exploration mask (a lockstep actor's, `at`,
        drawing with a generator of its own from its key)."""
        roles = sorted(role for role in self.pools if _owner(role))
        keys = jax.random.split(key, max(1, len(roles)))
        players = {}
        for role, k in zip(roles, keys, strict=False):
            other = others[_owner(role)]
            policy = snapshot_policy(other.core, device, num_games, False, k)
            players[role] = PoolPlayer(self.pools[role], policy, _to(device), at, _draws(k))
        return players


def _owner(role: str) -> str:
    """The other agent whose snapshots a pool role holds ("pool:NAME" -> NAME), "" for the
    agent's own."""
    other = agent_snapshot(role)
    return other[1] if other else ""


def _draws(key: jax.Array) -> np.random.Generator:
    """A lockstep player's generator of snapshot draws, from its key."""
    return np.random.default_rng(np.asarray(jax.random.key_data(key)).tolist())


def _to(device: jax.Device) -> Callable[[PyTree], PyTree]:
    return lambda params: jax.device_put(params, device)


GREEDY = ":greedy"  # the player name of a snapshot role's greedy seats (`exploration_mask`)


def seated_roles(seats: SeatPlan, num_games: int) -> list[tuple[str, ...]]:
    """`seats.roles(num_games)` with snapshot roles of greedy seats named `<role>:greedy`."""
    return [
        tuple(
            r + GREEDY if r in SNAPSHOT_ROLES and seats.greedy_seat(s) else r
            for s, r in enumerate(pattern)
        )
        for pattern in seats.roles(num_games)
    ]
