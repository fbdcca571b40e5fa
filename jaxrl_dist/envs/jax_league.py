"""The opponent pool of `acting/opponent_pool.py` as a pure state, for board games inside jit.

The same rules as the host pool: a snapshot of the actor params at the start and every
`every_updates` updates, the newest `capacity` kept (a ring of slots), each game's snapshot drawn
when the game starts by `uniform`, `latest` (the newest half the time) or `pfsp` sampling (weight
`(1 - score) ** exponent`, the learner's score against the snapshot smoothed to 0.5 before any
game), the learner's wins, draws and losses against each snapshot. Two differences in timing:
a game draws its snapshot when it starts (the host pool at the game's first opponent move), and
the games that ended in a rollout are recorded after its update (so sampling reads records up to
one rollout old). Snapshot ids only grow: a game whose snapshot left the pool records nothing
and plays on against whatever snapshot holds its slot (the host finishes it with its cached copy
of the dropped one). `frozen` is the policy the run started with.

Pure and jittable; it lives in the Anakin carry (one per seed, replicated over the mesh), so a
checkpoint holds it and a resume takes back the same opponents and records. `AgentLeagues`
holds the same of other agents of the run (a league across agents).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_dist.envs.seats import AGENT_ROLE, FROZEN_ROLE, POOL_ROLE, agent_snapshot
from jaxrl_dist.types import PyTree

WIN, DRAW, LOSS = 0, 1, 2  # columns of `record`, the learner's results


class League(NamedTuple):
    """Snapshots `[K, ...]` with their ids (`-1`: empty slot), the update each was taken at,
    the learner's `[K, 3]` wins/draws/losses against each; the next id; `frozen` params; the
    updates seen."""

    snapshots: PyTree
    ids: jax.Array  # [K] int32
    taken_at: jax.Array  # [K] int32
    record: jax.Array  # [K, 3] int32
    next_id: jax.Array  # [] int32
    frozen: PyTree
    updates: jax.Array  # [] int32


class LeagueRules(NamedTuple):
    """The pool's settings (`config.seats`' `pool_*`); `sampling` one of `POOL_SAMPLING`."""

    capacity: int
    every_updates: int
    sampling: str = "pfsp"
    pfsp_exponent: float = 2.0


def init_league(rules: LeagueRules, params: PyTree) -> League:
    """A fresh league: `params` as snapshot 0 and as the frozen policy."""
    k = rules.capacity
    snapshots = jax.tree.map(lambda x: jnp.zeros((k, *x.shape), x.dtype), params)
    empty = League(
        snapshots=snapshots,
        ids=jnp.full((k,), -1, jnp.int32),
        taken_at=jnp.zeros((k,), jnp.int32),
        record=jnp.zeros((k, 3), jnp.int32),
        next_id=jnp.zeros((), jnp.int32),
        frozen=params,
        updates=jnp.zeros((), jnp.int32),
    )
    return _add(empty, params, jnp.zeros((), jnp.int32))


def _add(league: League, params: PyTree, update: jax.Array) -> League:
    slot = league.next_id % league.ids.shape[0]  # the ring's oldest
    snapshots = jax.tree.map(lambda s, p: s.at[slot].set(p), league.snapshots, params)
    return league._replace(
        snapshots=snapshots,
        ids=league.ids.at[slot].set(league.next_id),
        taken_at=league.taken_at.at[slot].set(update),
        record=league.record.at[slot].set(0),
        next_id=league.next_id + 1,
    )


def probabilities(rules: LeagueRules, league: League) -> jax.Array:
    """`[K]` the chance of drawing each slot now (0 for empty slots)."""
    live = league.ids >= 0
    if rules.sampling == "uniform":
        weights = jnp.ones(live.shape)
    elif rules.sampling == "latest":
        newest = league.ids == jnp.max(league.ids)
        weights = 0.5 / jnp.sum(live) + 0.5 * newest
    else:
        wins, draws, losses = league.record.T.astype(jnp.float32)
        score = (wins + 0.5 * draws + 1.0) / (wins + draws + losses + 2.0)
        weights = (1.0 - score) ** rules.pfsp_exponent
    weights = jnp.where(live, weights, 0.0)
    return weights / jnp.sum(weights)


def draw_slot(rules: LeagueRules, league: League, key: jax.Array) -> tuple[jax.Array, jax.Array]:
    """A game's opponent: `(slot, snapshot id)` drawn by the rules' sampling."""
    p = probabilities(rules, league)
    slot = jax.random.choice(key, p.shape[0], p=p).astype(jnp.int32)
    return slot, league.ids[slot]


def record_games(league: League, snapshot_id: jax.Array, learner_return: jax.Array) -> League:
    """Adds finished games: `snapshot_id [...]` int32 (-1: no pool game ended there) and the
    learner's return in each (> 0 win, 0 draw, < 0 loss). Ids no longer in the pool count
    nowhere."""
    outcome = jnp.where(learner_return > 0, WIN, jnp.where(learner_return == 0, DRAW, LOSS))
    against = (snapshot_id[..., None] == league.ids) & (snapshot_id[..., None] >= 0)  # [..., K]
    counts = jnp.einsum("...k,...o->ko", against, jax.nn.one_hot(outcome, 3, dtype=jnp.int32))
    return league._replace(record=league.record + counts.astype(jnp.int32))


def after_update(rules: LeagueRules, league: League, params: PyTree) -> League:
    """One more learner update; a snapshot of `params` (its actor params) when one is due."""
    updates = league.updates + 1
    league = league._replace(updates=updates)
    due = updates % rules.every_updates == 0
    added = _add(league, params, updates)
    return jax.tree.map(lambda a, b: jnp.where(due, a, b), added, league)


def league_records(league: League) -> list[dict[str, int]]:
    """The learner's record against each live snapshot, oldest first (host values):
    `[{"id", "update", "wins", "draws", "losses"}]`, as `OpponentPool.records()` gives them."""
    ids, taken, record = (np.asarray(x) for x in (league.ids, league.taken_at, league.record))
    return [
        {
            "id": int(ids[s]),
            "update": int(taken[s]),
            **dict(zip(("wins", "draws", "losses"), record[s].tolist(), strict=True)),
        }
        for s in np.argsort(ids)
        if ids[s] >= 0
    ]


class AgentLeagues:
    """The other agents' leagues in an agent's games (a league across agents, `config.agents`):
    for each other agent NAME that a stream plays as "pool:NAME" or "frozen:NAME", a `League`
    of NAME's params (its starting params as `frozen`, a snapshot every `every_updates` of its
    updates), this agent's record against each snapshot (its own PFSP). Pure; the leagues
    live in the game's shared state beside the agent's own league.

    Args:
      roles: the game's opponent roles (`SeatedJaxGame.roles`); those of other agents'
        snapshots are this league's.
      rules: the pools' settings (the run's `seats.pool_*`).
    """

    def __init__(self, roles: tuple[str, ...], rules: LeagueRules | None):
        self.roles = {r: agent_snapshot(r) for r in roles if agent_snapshot(r)}
        self.names = sorted({name for _, name in self.roles.values()})
        if self.roles and rules is None:
            raise ValueError("a stream plays another agent's snapshots: give the league's rules")
        self._rules = rules
        self._index = {r: roles.index(r) for r in self.roles}
        # The agents whose pool a stream plays (the others only their start: one slot).
        self.pooled = {name for kind, name in self.roles.values() if kind == POOL_ROLE}

    def __bool__(self) -> bool:
        return bool(self.roles)

    def agent_roles(self) -> list[str]:
        """The live roles ("agent:NAME") whose params the leagues snapshot."""
        return [AGENT_ROLE + name for name in self.names]

    def init(self, agents: dict[str, PyTree]) -> dict[str, League]:
        """`{NAME: League}` from each agent's starting params (`agents["agent:NAME"]`)."""
        return {n: init_league(self._rules_of(n), agents[AGENT_ROLE + n]) for n in self.names}

    def _rules_of(self, name: str) -> LeagueRules:
        return self._rules if name in self.pooled else self._rules._replace(capacity=1)

    def draw(
        self,
        leagues: dict[str, League],
        key: jax.Array,
        opponent: jax.Array,
        starts: jax.Array,
        snapshot: jax.Array,
        slot: jax.Array,
    ) -> tuple[jax.Array, jax.Array]:
        """A stream's `(snapshot id, slot)` after a step: at a new game (`starts`) against a
        "pool:NAME" (`opponent`: its role's index), a snapshot drawn from NAME's league."""
        for i, (role, (kind, name)) in enumerate(self.roles.items()):
            if kind != POOL_ROLE:
                continue
            new_slot, new_id = draw_slot(self._rules, leagues[name], jax.random.fold_in(key, i))
            here = starts & (opponent == self._index[role])
            snapshot = jnp.where(here, new_id, snapshot)
            slot = jnp.where(here, new_slot, slot)
        return snapshot, slot

    def params(self, leagues: dict[str, League], role: str, slot: jax.Array) -> PyTree:
        """The params role `role` plays: NAME's snapshot in `slot`, or its starting params."""
        kind, name = self.roles[role]
        league = leagues[name]
        if kind == FROZEN_ROLE:
            return league.frozen
        return jax.tree.map(lambda s: s[slot], league.snapshots)

    def record(
        self, leagues: dict[str, League], pool_game: jax.Array, opponent: jax.Array, result
    ) -> dict[str, League]:
        """The finished games against each "pool:NAME" (`pool_game`, `opponent` and the
        learner's `result`, `[...]` as the rollout's info holds them) in NAME's league."""
        out = dict(leagues)
        for role, (kind, name) in self.roles.items():
            if kind == POOL_ROLE:
                games = jnp.where(opponent == self._index[role], pool_game, -1)
                out[name] = record_games(out[name], games, result)
        return out

    def after_update(self, leagues: dict[str, League], agents: dict[str, PyTree]) -> dict:
        """After an update of the run: each NAME's league a snapshot of NAME's params after
        its update (`agents["agent:NAME"]`) when one is due."""
        return {
            n: after_update(self._rules, league, agents[AGENT_ROLE + n])
            if n in self.pooled
            else league
            for n, league in leagues.items()
        }
