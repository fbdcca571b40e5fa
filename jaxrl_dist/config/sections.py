"""Nested config sections of the runtime: `config.sebulba.inference.*`, `config.replay.*`,
`config.seats.*` and `config.wandb.*`.

Each is a frozen dataclass whose `__post_init__` raises ValueError with one line naming the
field (in `config.<section>.<field>` terms) and what is wrong.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

import numpy as np

from jaxrl_dist.defaults import changed_field
from jaxrl_dist.envs.seats import (
    AGENT_ROLE,
    FROZEN_ROLE,
    LEARNER_ROLE,
    SCRIPTED_ROLES,
    SNAPSHOT_ROLES,
    agent_snapshot,
)

CLIENTS = ("local", "server")


def field_value(config, path: str):
    """The value of dotted field `path` (`"sebulba.inference.client"`) of a config with sections."""
    for name in path.split("."):
        config = getattr(config, name)
    return config


def leaf_paths(cls: type, prefix: str = "") -> list[str]:
    """The dotted names of every field of dataclass `cls`, nested sections' field by field
    (`"sebulba.inference.client"`)."""
    hints = typing.get_type_hints(cls)
    paths = []
    for field in dataclasses.fields(cls):
        kind = hints[field.name]
        if dataclasses.is_dataclass(kind):
            paths += leaf_paths(kind, f"{prefix}{field.name}.")
        else:
            paths.append(f"{prefix}{field.name}")
    return paths


def _bad(section: str, field: str, value, why: str):
    raise ValueError(f"config.{section}.{field}={value!r} {why}")


@dataclasses.dataclass(frozen=True)
class InferenceConfig:
    """Where actors get their actions (the policy seam).

    `client="local"`: each actor thread runs the jitted actor half on its own device with the
    newest params (Sebulba). `client="server"`: one central inference server thread per
    inference device batches the requests of the actor threads (SEED RL): up to `batch_size`
    envs or `timeout_ms` after the first request, padded to `batch_size` so it compiles once;
    it refreshes its params every `broadcast_period` updates.
    """

    client: str = "local"  # "local" (each actor infers) or "server" (central batched inference)
    batch_size: int = 0  # envs per server batch; 0 = every actor thread's recv() batch
    timeout_ms: float = 2.0  # a server batch waits at most this long after its first request
    broadcast_period: int = 1  # updates between a server's params refreshes
    device_ids: tuple[int, ...] = ()  # server devices (local ids); empty = actor_device_ids

    def __post_init__(self):
        if self.client not in CLIENTS:
            _bad("sebulba.inference", "client", self.client, f"must be one of {CLIENTS}")
        if self.batch_size < 0:
            _bad("sebulba.inference", "batch_size", self.batch_size, "must be >= 0 (0 = automatic)")
        if self.timeout_ms < 0:
            _bad("sebulba.inference", "timeout_ms", self.timeout_ms, "must be >= 0")
        if self.broadcast_period < 1:
            _bad("sebulba.inference", "broadcast_period", self.broadcast_period, "must be >= 1")
        server = [f.name for f in dataclasses.fields(self) if f.name != "client"]
        changed = changed_field(self, server) if self.client == "local" else None
        if changed:  # the server's settings would be silently ignored
            name, value, default = changed
            _bad(
                "sebulba.inference",
                name,
                value,
                "is the inference server's; set config.sebulba.inference.client='server', "
                f"or leave it at {default!r}",
            )


# The replay fields a running job can change (`run/control.py`; Sebulba's host replays).
REPLAY_RUNTIME_FIELDS = ("samples_per_insert", "priority_exponent")


@dataclasses.dataclass(frozen=True)
class ReplayConfig:
    """The replays' settings (agents whose data flow is "replay" or "prioritized").

    "replay" (uniform) holds and samples whole segments of `unroll_length` transitions:
    `capacity`, `min_size` and `samples_per_insert` count segments, and the learner samples
    `batch_size` segments per update. "prioritized" samples single transitions (each with its
    n-step window of `n_step`) in proportion to `priority ** priority_exponent`: there they
    count transitions, and `batch_size` is transitions per update.

    `save`: each checkpoint also holds every process's replay contents (rings, priorities,
    the rate limiter's counts and the sampler's RNG), and a resume takes them back; without
    it a resume starts with an empty replay and refills to `min_size` first.

    Learning starts once `min_size` are in; then the rate limiter keeps each one sampled
    `samples_per_insert` times on average, within `tolerance` samples: actors wait only when
    they run more than that ahead of the learner, and the learner when it runs ahead.
    """

    capacity: int = 10_000  # segments (transitions when prioritized) the replay holds
    min_size: int = 100  # learning starts once this many are in
    samples_per_insert: float = 1.0  # how often each item is sampled on average
    tolerance: float = 0.0  # 0 = automatic: room for a batch plus a few actor rollouts
    n_step: int = 1  # "prioritized": transitions in a sampled window (1..unroll_length)
    priority_exponent: float = 0.6  # "prioritized": alpha (Schaul et al. 2016)
    priority_epsilon: float = 1e-6  # "prioritized": added to each priority before alpha
    # Checkpoints hold the replay's contents, so a resume samples what the run had (None =
    # automatic: on for vector observations, off for image frames, where a buffer is GBs).
    save: bool | None = None
    # Transitions (segments, "replay") the learner samples per update; 0 = config.batch_size.
    # For the Anakin runtime, where config.batch_size counts the envs of a seed; on Sebulba the
    # learner's batch is config.batch_size, so it stays 0 there.
    batch_size: int = 0

    def __post_init__(self):
        if self.batch_size < 0:
            _bad("replay", "batch_size", self.batch_size, "must be >= 0 (0 = config.batch_size)")
        if self.capacity < 1:
            _bad("replay", "capacity", self.capacity, "must be >= 1")
        if not 1 <= self.min_size <= self.capacity:
            _bad("replay", "min_size", self.min_size, f"must be in [1, capacity={self.capacity}]")
        if self.samples_per_insert <= 0:
            _bad("replay", "samples_per_insert", self.samples_per_insert, "must be > 0")
        if self.tolerance < 0:
            _bad("replay", "tolerance", self.tolerance, "must be >= 0 (0 = automatic)")
        if self.n_step < 1:
            _bad("replay", "n_step", self.n_step, "must be >= 1")
        if not 0 <= self.priority_exponent <= 1:
            _bad("replay", "priority_exponent", self.priority_exponent, "must be in [0, 1]")
        if not self.priority_epsilon > 0:
            _bad("replay", "priority_epsilon", self.priority_epsilon, "must be > 0")


WANDB_MODES = ("", "online", "offline", "disabled")


@dataclasses.dataclass(frozen=True)
class WandbConfig:
    """Weights & Biases logging (`pip install -e '.[wandb]'`; wandb is imported only when
    `project` is set). The run gets `metrics.jsonl`'s records (against `env_steps`), the config,
    the evaluations, `summary.json` and `learning_curve.png`; its files live in the work dir's
    `wandb/`, and a `--resume` continues the same W&B run (its id is kept in `wandb_run_id`)."""

    project: str = ""  # the W&B project; empty = no W&B
    entity: str = ""  # the W&B team or user; empty = your default
    group: str = ""  # groups runs (e.g. the seeds of one sweep)
    tags: tuple[str, ...] = ()  # W&B tags
    name: str = ""  # the run's display name; empty = the work dir's name
    mode: str = ""  # "online", "offline" (sync later: `wandb sync`) or "disabled"; "" = WANDB_MODE

    def __post_init__(self):
        if self.mode not in WANDB_MODES:
            _bad("wandb", "mode", self.mode, f"must be one of {WANDB_MODES}")
        changed = None if self.project else changed_field(self)
        if changed:  # no project: W&B is off and nothing reads it
            name, value, default = changed
            why = f"is read only with config.wandb.project set; leave it at {default!r}"
            _bad("wandb", name, value, why)

    @property
    def enabled(self) -> bool:
        return bool(self.project) and self.mode != "disabled"


CHECKPOINT_OPPONENT = "checkpoint:"  # an evaluation opponent: another run's greedy policy


def names_checkpoint(name: str) -> bool:
    """Whether opponent `name` is "checkpoint:PATH[@STEP]" (with a path)."""
    return name.startswith(CHECKPOINT_OPPONENT) and len(name) > len(CHECKPOINT_OPPONENT)


POOL_SAMPLING = ("uniform", "latest", "pfsp")


@dataclasses.dataclass(frozen=True)
class SeatsConfig:
    """Who plays each seat of a turn-based game (EnvPool's `TicTacToe-v1`, `ConnectFour-v1`, ...).

    `games`: role patterns, one tuple of roles per game (a role per seat), cycled over each
    actor's games: `(("learner", "learner"), ("learner", "random"), ("random", "learner"))`
    makes a third of the games self-play and the rest the learner against uniform random in
    either seat. Roles: "learner"; "pool" (a snapshot of the learner from the opponent pool,
    drawn per game); "frozen" (the learner's policy at the run's start); "random" (uniform over
    legal actions); "heuristic" (win if you can, block if you must; tic-tac-toe and connect
    four); "perfect" (minimax; tic-tac-toe). Empty: not a turn-based run. The learner sees one
    stream per seat it plays (`envs/seats.py`): env steps count the learner's own moves and
    game ends.

    `learning_mask[s]` (one per seat; empty = all True): False makes seat `s` of every game
    "frozen" where its pattern says "learner": its moves come from the policy the run started
    with and never reach the learner. `exploration_mask[s]` (empty = all True): False makes the
    snapshot players ("pool", "frozen") of seat `s` act greedily instead of sampling.

    The opponent pool: a snapshot of the learner every `pool_every_updates` updates (and one at
    the start), the newest `pool_capacity` kept, drawn by `pool_sampling` ("uniform", "latest":
    the newest half the time, "pfsp": prioritized fictitious self-play, weight `(1 - score) **
    pool_pfsp_exponent`). Saved in every checkpoint; a resume takes it back.

    `opening_plies` (k): each training game starts with n uniformly random legal moves, n
    uniform in [0, k] per game, made by no seat's policy (`envs/seats.py`), so self-play meets
    the openings its own policy avoids; evaluations always start from the empty board.

    `eval_opponent`: who the learner plays in evaluations, taking each seat in turn: a
    scripted role or "checkpoint:PATH[@STEP]" (another run's greedy policy;
    `evaluation/opponents.py`).
    """

    # Role patterns, one tuple of roles per game (learner, pool, frozen, random, ...).
    games: tuple[tuple[str, ...], ...] = ()
    eval_opponent: str = "random"  # who evaluation plays: a scripted role or checkpoint:PATH[@STEP]
    learning_mask: tuple[bool, ...] = ()  # per seat: whether the learner learns from it
    # Per seat: whether snapshot players sample (else act greedily).
    exploration_mask: tuple[bool, ...] = ()
    pool_capacity: int = 16  # snapshots the opponent pool keeps
    pool_every_updates: int = 50  # updates between snapshots added to the pool
    pool_sampling: str = "pfsp"  # "uniform", "latest" or "pfsp" (prioritised fictitious self-play)
    # Pfsp weight exponent on an opponent's win rate against the learner.
    pool_pfsp_exponent: float = 2.0
    opening_plies: int = 0  # random opening moves before the seats play

    def __post_init__(self):
        if len({len(p) for p in self.games}) > 1:
            _bad("seats", "games", self.games, "must give every game the same number of seats")
        if self.eval_opponent not in SCRIPTED_ROLES and not names_checkpoint(self.eval_opponent):
            _bad(
                "seats",
                "eval_opponent",
                self.eval_opponent,
                f"must be one of {SCRIPTED_ROLES} "
                f"or {CHECKPOINT_OPPONENT}PATH[@STEP] (another run's checkpoint)",
            )
        seats = len(self.games[0]) if self.games else 0
        for name in ("learning_mask", "exploration_mask"):
            mask = getattr(self, name)
            if mask and len(mask) != seats:
                _bad("seats", name, mask, f"must give one bool per seat ({seats}) or be empty")
        if self.pool_capacity < 1:
            _bad("seats", "pool_capacity", self.pool_capacity, "must be >= 1")
        if self.pool_every_updates < 1:
            _bad("seats", "pool_every_updates", self.pool_every_updates, "must be >= 1")
        if self.pool_sampling not in POOL_SAMPLING:
            _bad("seats", "pool_sampling", self.pool_sampling, f"must be one of {POOL_SAMPLING}")
        if self.pool_pfsp_exponent < 0:
            _bad("seats", "pool_pfsp_exponent", self.pool_pfsp_exponent, "must be >= 0")
        if self.opening_plies < 0:
            _bad("seats", "opening_plies", self.opening_plies, "must be >= 0")

    @property
    def enabled(self) -> bool:
        return bool(self.games)

    def set_without_games(self) -> tuple[str, Any, Any] | None:
        """(name, value, default) of the first field set away from its default, which only a
        game with seats reads; None when none is."""
        return changed_field(self, [f.name for f in dataclasses.fields(self) if f.name != "games"])

    def role_problem(self) -> str | None:
        """What is wrong with the roles of a one-agent run's games (one line), or None; with
        `config.agents` the games name agents instead (`config/agents.py` checks them). An
        agent's view may name the run's other agents (`agent:NAME`)."""
        known = (LEARNER_ROLE, *SNAPSHOT_ROLES, *SCRIPTED_ROLES)
        for pattern in self.games:
            unknown = {
                r
                for r in pattern
                if r not in known and not r.startswith(AGENT_ROLE) and not agent_snapshot(r)
            }
            if unknown:
                return (
                    f"config.seats.games={self.games!r} names unknown roles {sorted(unknown)}; "
                    f"use one of {known}"
                )
            if LEARNER_ROLE not in pattern:
                return f"config.seats.games={self.games!r} has a game {pattern} without the learner"
            if LEARNER_ROLE not in self.learned(pattern):
                return (
                    f"config.seats.learning_mask={self.learning_mask!r} leaves game {pattern} "
                    "without a learning seat"
                )
        return None

    def learned(self, pattern: tuple[str, ...]) -> tuple[str, ...]:
        """`pattern` with the learner's seats that `learning_mask` turns off made "frozen"."""
        mask = self.learning_mask or (True,) * len(pattern)
        return tuple(
            FROZEN_ROLE if r == LEARNER_ROLE and not m else r
            for r, m in zip(pattern, mask, strict=True)
        )

    def self_play_game(self) -> tuple[str, ...] | None:
        """The first game that seats one learner in two of its seats (self-play: "learner"
        twice, or with `config.agents` an agent named twice), or None."""
        for pattern in self.games:
            learners = [
                r
                for r in self.learned(tuple(pattern))
                if r not in (*SNAPSHOT_ROLES, *SCRIPTED_ROLES) and not agent_snapshot(r)
            ]
            if len(learners) != len(set(learners)):
                return tuple(pattern)
        return None

    def roles(self, num_games: int) -> list[tuple[str, ...]]:
        """Each of `num_games` games' roles: the patterns cycled, `learning_mask` applied."""
        return [self.learned(tuple(self.games[g % len(self.games)])) for g in range(num_games)]

    def streams(self, num_games: int) -> int:
        """The learner's streams over `num_games` games: its seats in each."""
        return sum(r.count(LEARNER_ROLE) for r in self.roles(num_games))

    def greedy_streams(self, num_games: int) -> np.ndarray | None:
        """`[streams]` bool over `streams(num_games)`: the learner's streams whose seat
        `exploration_mask` makes greedy (a replay agent's greedy seat), in (game, seat) order as
        `envs/seats.py` numbers them; None when every stream explores."""
        if not self.enabled or not self.exploration_mask:
            return None
        mask = [
            self.greedy_seat(seat)
            for roles in self.roles(num_games)
            for seat, role in enumerate(roles)
            if role == LEARNER_ROLE
        ]
        return np.array(mask, bool) if any(mask) else None

    def snapshot_roles(self) -> set[str]:
        """The snapshot roles ("pool", "frozen", and in an agent's view another agent's
        "pool:NAME", "frozen:NAME") some game plays."""
        roles = {r for pattern in self.games for r in self.learned(pattern)}
        return {r for r in roles if r in SNAPSHOT_ROLES or agent_snapshot(r)}

    def greedy_seat(self, seat: int) -> bool:
        """Whether the snapshot players of `seat` act greedily (`exploration_mask`)."""
        return bool(self.exploration_mask) and not self.exploration_mask[seat]
