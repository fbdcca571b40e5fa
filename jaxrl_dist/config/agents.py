"""Several learning agents in one run (rbgame's `DecentralizedTrainer`): `config.agents`.

    c.agents = (
        {"name": "rb", "algorithm": "rainbow", "algo": {...}, "replay": {...}, "batch_size": 128},
        {"name": "ppo", "algorithm": "ppo", "algo": {...}, "network": {...}, "batch_size": 16},
    )
    c.learning_mask = (True, True)      # per agent: False plays its params, never updated
    c.exploration_mask = (True, True)   # per agent: False acts greedily (Q: epsilon 0)
    c.seats.games = (("rb", "ppo"), ("ppo", "rb"), ("rb", "random"), ("ppo", "pool:ppo"))

Each agent has its own algorithm, hyperparameters, network, replay, schedules, learner batch
and warm start; everything else (the env, the actors' sizes, T, stops, evaluation cadence) is
the run's. Seats name agents; `pool:NAME` and `frozen:NAME` are that agent's opponent-pool
snapshots (taken every `seats.pool_every_updates` of its own updates) and its starting params,
played in any game of the run: against their own agent (self-play) or against another (a
league across agents: an exploiter of another agent's past versions, each player's PFSP from
its own record against them); the scripted roles stay. Empty `agents`: today's run, one
agent named "learner", the top-level `algorithm`/`algo`/... fields.

An agent's *view* (`agent_view`) is the run's config with that agent's fields in the top-level
places and the seats seen from its side: its own seats "learner", its pool "pool", the other
agents `agent:NAME` (played with their current params, not learned from in its games). Every
part that takes a config (the algorithm's checks, the data flow, the learner) takes a view
unchanged.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from jaxrl_dist.agents.intrinsic.config import IntrinsicConfig
from jaxrl_dist.config.errors import ConfigError
from jaxrl_dist.config.sections import ReplayConfig, field_value
from jaxrl_dist.envs.seats import (
    AGENT_ROLE,
    FROZEN_ROLE,
    LEARNER_ROLE,
    POOL_ROLE,
    SCRIPTED_ROLES,
)
from jaxrl_dist.networks import NetworkConfig

# The run's fields an agent section sets for itself (the rest are the run's).
AGENT_FIELDS = (
    "algorithm",
    "algo",
    "network",
    "intrinsic",
    "replay",
    "schedules",
    "batch_size",
    "warm_start",
)
# Sections built with their own dataclass inside an agent section.
AGENT_SECTIONS = {
    "network": NetworkConfig,
    "intrinsic": IntrinsicConfig,
    "replay": ReplayConfig,
}
AGENT_SEED_STRIDE = 1_000_003  # agent i's seed: the run's + i * this (a prime), mod 2**32


@dataclasses.dataclass(frozen=True)
class AgentSection:
    """One named agent of `config.agents`: its algorithm (`algo` is that algorithm's config
    class), network, replay, schedules, learner batch (0 = `config.batch_size`) and warm start
    (`RUN[@latest|@best|@STEP]`, another run's params)."""

    name: str
    algorithm: str = "impala"
    algo: Any = None
    network: NetworkConfig = dataclasses.field(default_factory=NetworkConfig)
    intrinsic: IntrinsicConfig = dataclasses.field(default_factory=IntrinsicConfig)
    replay: ReplayConfig = dataclasses.field(default_factory=ReplayConfig)
    schedules: dict = dataclasses.field(default_factory=dict)
    batch_size: int = 0
    warm_start: str = ""
    # Where the warm start's run had several agents: which one's params ("" = this name).
    warm_start_agent: str = ""

    def __post_init__(self):
        if not self.name or not self.name.replace("_", "").isalnum():
            raise ConfigError(
                f"config.agents: name {self.name!r} must be letters, digits and _ (it prefixes "
                "the agent's log keys)"
            )
        # "greedy": a greedy seat's snapshot player is "pool:greedy" (`seat_pools.GREEDY`).
        reserved = (
            LEARNER_ROLE,
            POOL_ROLE,
            FROZEN_ROLE,
            *SCRIPTED_ROLES,
            "agent",
            "eval",
            "greedy",
        )
        if self.name in reserved:
            raise ConfigError(
                f"config.agents: name {self.name!r} is a role or a log key; rename the agent"
            )
        if self.batch_size < 0:
            raise ConfigError(
                f"config.agents.{self.name}.batch_size={self.batch_size} must be >= 0 "
                "(0 = config.batch_size)"
            )


@dataclasses.dataclass(frozen=True)
class AgentView:
    """One agent of a run: its name, its config view, and the two masks' bits."""

    name: str
    config: Any
    learning: bool = True
    exploring: bool = True
    warm_start_agent: str | None = None  # the warm start's agent, if its run had several


def split_role(role: str) -> tuple[str, str]:
    """("pool" | "frozen" | "", agent name) of a seat role under `config.agents`: "pool:rb" ->
    ("pool", "rb"); "rb" -> ("", "rb"); a scripted role -> ("", role)."""
    kind, sep, name = role.partition(":")
    if sep and kind in (POOL_ROLE, FROZEN_ROLE):
        return kind, name
    return "", role


def agents_problem(config: Any) -> str | None:
    """What is wrong between `config.agents`, its masks and the seats (one line), or None.
    Without agents only the masks are checked (they need agents)."""
    agents = config.agents
    if not agents:
        fields = ["learning_mask", "exploration_mask"]
        # An agent's view names its own slots "learner" and the others' "agent:NAME".
        slots = config.sebulba.agent_slots
        if any(s != LEARNER_ROLE and not s.startswith(AGENT_ROLE) for s in slots):
            fields.append("sebulba.agent_slots")
        for mask in fields:
            if field_value(config, mask):
                return (
                    f"config.{mask} names or masks agents of config.agents, which is empty; "
                    "name the agents first"
                )
        return None
    names = [a.name for a in agents]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        return f"config.agents names {twice[0]!r} twice; give every agent its own name"
    for mask in ("learning_mask", "exploration_mask"):
        value = getattr(config, mask)
        if value and len(value) != len(agents):
            return (
                f"config.{mask}={value} must give one bool per agent of config.agents "
                f"({len(agents)}: {', '.join(names)}) or be empty"
            )
    learning = dict(zip(names, config.learning_mask or (True,) * len(names), strict=True))
    if not any(learning.values()):
        return "config.learning_mask turns every agent off; at least one agent must learn"
    if config.sebulba.agent_slots or config.sebulba.agents_per_env > 1:
        return _slots_problem(config, names, learning)
    return _seats_problem(config.seats, names, learning)


def _slots_problem(config: Any, names: list[str], learning: dict[str, bool]) -> str | None:
    """`config.sebulba.agent_slots` on a simultaneous-move task: one agent per agent of each env."""
    slots, agents = config.sebulba.agent_slots, config.sebulba.agents_per_env
    if not slots:
        if len(names) == 1:
            return None  # one agent plays every slot, as without config.agents
        return (
            f"config.agents: with {agents} agents per env, name the agent of each with "
            f"config.sebulba.agent_slots, e.g. {tuple(names[:agents])}"
        )
    if len(slots) != agents:
        return (
            f"config.sebulba.agent_slots={slots} must name one agent per agent of each env "
            f"(config.sebulba.agents_per_env={agents})"
        )
    unknown = [s for s in slots if s not in names]
    if unknown:
        return (
            f"config.sebulba.agent_slots names {unknown[0]!r}, which is no agent of config.agents "
            f"({', '.join(names)})"
        )
    if not any(learning[s] for s in slots):
        return "config.sebulba.agent_slots: no slot is played by a learning agent"
    missing = [n for n in names if n not in slots]
    if missing:
        return (
            f"config.agents: agent {missing[0]!r} plays no slot of config.sebulba.agent_slots; "
            "name "
            "it, or drop it"
        )
    return None


def _seats_problem(seats: Any, names: list[str], learning: dict[str, bool]) -> str | None:
    for per_seat in ("learning_mask", "exploration_mask"):
        if getattr(seats, per_seat):
            return (
                f"config.seats.{per_seat} is per seat, config.{per_seat} per agent: with "
                f"config.agents use config.{per_seat}"
            )
    if not seats.enabled:
        if len(names) > 1:
            return (
                "config.agents: several agents play a game together: a turn-based one "
                "(config.seats.games) or a simultaneous-move one (config.sebulba.agent_slots)"
            )
        return None
    seated = set()
    for pattern in seats.games:
        for role in pattern:
            kind, name = split_role(role)
            if role.startswith(AGENT_ROLE) or role == LEARNER_ROLE:
                return (
                    f"config.seats.games names {role!r}; with config.agents a seat names an "
                    f"agent ({', '.join(names)}), pool:NAME, frozen:NAME or a scripted role"
                )
            if name in SCRIPTED_ROLES and not kind:
                continue
            if name not in names:
                return (
                    f"config.seats.games names {role!r}, which is no agent of config.agents "
                    f"({', '.join(names)}) nor a scripted role {SCRIPTED_ROLES}"
                )
            if kind == POOL_ROLE and not learning[name]:
                return (
                    f"config.seats.games: {role!r} plays in game {pattern}, but {name!r} does "
                    f"not learn (config.learning_mask): its pool would hold its starting params "
                    f"only; name frozen:{name} or let it learn"
                )
            if not kind:
                seated.add(name)
        if not any(learning.get(role, False) for role in pattern):
            return f"config.seats.games has a game {pattern} where no agent learns"
    unseated = [n for n in names if n not in seated]
    if unseated:
        return (
            f"config.agents: agent {unseated[0]!r} plays no seat of config.seats.games; "
            "name it in a game, or drop it"
        )
    return None


def agent_view(config: Any, index: int) -> AgentView:
    """Agent `index` of `config.agents` as an `AgentView` (see the module docstring); with no
    agents, the run itself as agent "learner"."""
    if not config.agents:
        return AgentView(LEARNER_ROLE, config)
    agent = config.agents[index]
    fields = {f: getattr(agent, f) for f in AGENT_FIELDS}
    fields["batch_size"] = agent.batch_size or config.batch_size
    fields["total_env_steps"] = _share_of_steps(config, index)
    # Each agent its own streams (params, actors, pools); the first keeps the run's seed.
    fields["seed"] = (config.seed + AGENT_SEED_STRIDE * index) % 2**32
    seats = dataclasses.replace(config.seats, games=_seen_by(config.seats.games, agent.name))
    (slots,) = _seen_by((config.sebulba.agent_slots,), agent.name) or ((),)
    view = dataclasses.replace(
        config,
        agents=(),
        learning_mask=(),
        exploration_mask=(),
        seats=seats,
        sebulba=dataclasses.replace(config.sebulba, agent_slots=slots),
        **fields,
    )
    learning = config.learning_mask[index] if config.learning_mask else True
    exploring = config.exploration_mask[index] if config.exploration_mask else True
    warm_agent = agent.warm_start_agent or agent.name
    return AgentView(agent.name, view, learning, exploring, warm_agent)


def _share_of_steps(config: Any, index: int) -> int:
    """Agent `index`'s share of the run's env steps, which its schedules (`anneal_lr`) span.
    On Sebulba every learning agent has actors of the same size: an equal share. On Anakin
    every learning agent updates once per update of the run, on its `batch_size` streams: a
    share in proportion to its streams."""
    learning = config.learning_mask or (True,) * len(config.agents)
    if config.runtime != "anakin" or not learning[index]:
        return max(1, config.total_env_steps // sum(learning))
    streams = [a.batch_size or config.batch_size for a in config.agents]
    total = sum(n for n, on in zip(streams, learning, strict=True) if on)
    return max(1, config.total_env_steps * streams[index] // total)


def agent_views(config: Any) -> tuple[AgentView, ...]:
    """Every agent's view, in `config.agents` order (one "learner" view without agents)."""
    return tuple(agent_view(config, i) for i in range(max(1, len(config.agents))))


def _seen_by(games: tuple, name: str) -> tuple:
    """The games in which `name` plays a seat, from its side: its seats "learner", its pool
    and start "pool"/"frozen", the other agents "agent:NAME" and their pools and starts
    "pool:NAME"/"frozen:NAME" (as the run names them)."""
    seen = []
    for pattern in games:
        if name not in pattern:
            continue
        roles = []
        for role in pattern:
            kind, who = split_role(role)
            if kind:  # its own pool and start, or another agent's (a league): "pool:NAME"
                roles.append(kind if who == name else role)
            elif who == name:
                roles.append(LEARNER_ROLE)
            elif who in SCRIPTED_ROLES:
                roles.append(who)
            else:
                roles.append(AGENT_ROLE + who)
        seen.append(tuple(roles))
    return tuple(seen)


def build_agents(raw: Any, algo_config_of: Any, build: Any) -> tuple[AgentSection, ...]:
    """`config.agents` as a tuple of dicts into `AgentSection`s: each agent's `algo` with its
    own algorithm's config class (`algo_config_of(name)`, ConfigError for an unknown one) and
    its sections with theirs; `build(cls, values, prefix)` checks and builds a dataclass."""
    if raw in (None, (), []):
        return ()
    if not isinstance(raw, list | tuple) or not all(isinstance(a, dict) for a in raw):
        raise ConfigError(
            "config.agents must be a tuple of dicts, one per agent, each with a 'name'"
        )
    built = []
    for i, values in enumerate(raw):
        values = dict(values)
        name = values.get("name")
        if not isinstance(name, str):
            raise ConfigError(f"config.agents[{i}] has no 'name'; give every agent a name")
        prefix = f"agents.{name}."
        algorithm = values.get("algorithm", AgentSection.algorithm)
        try:
            algo_cls = algo_config_of(algorithm)
        except ConfigError as e:
            raise ConfigError(str(e).replace("agents.NAME.", prefix)) from None
        values["algo"] = build(algo_cls, _section(values, "algo", prefix), f"{prefix}algo.")
        for section, cls in AGENT_SECTIONS.items():
            values[section] = build(cls, _section(values, section, prefix), f"{prefix}{section}.")
        built.append(build(AgentSection, values, prefix))
    return tuple(built)


def _section(values: dict, section: str, prefix: str) -> dict:
    """An agent's nested section as a dict (ConfigError naming it when it is not one)."""
    given = values.get(section) or {}
    if not isinstance(given, dict):
        raise ConfigError(f"config.{prefix}{section}={given!r} must be a dict of its fields")
    return dict(given)
