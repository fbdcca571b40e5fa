"""The engines' own config sections: `config.sebulba` (actor threads, EnvPools, the actor loop,
the queue, restarts, collection, env epochs, videos, agent rows, inference) and `config.anakin`
(seeds vmapped in one program). Every other field of a run is the shell's or is read alike by
every engine (`run/fields.py`); a section of another engine than `config.runtime`'s, set away
from its defaults, is refused in one line (`run/fields.py:refusal`)."""

from __future__ import annotations

import dataclasses

from jaxrl_dist.config.sections import InferenceConfig


def _bad(field: str, value: object, why: str) -> None:
    raise ValueError(f"config.{field}={value!r} {why}")


@dataclasses.dataclass(frozen=True)
class SebulbaConfig:
    """What only the Sebulba engine reads: actors that step EnvPools (or Python envs) in
    threads and feed a learner through a queue (`jaxrl_dist/sebulba`)."""

    # Actors: each actor thread owns one EnvPool of `envs_per_actor` envs.
    num_actor_threads: int = 1
    envs_per_actor: int = 16  # envs in each actor thread's EnvPool
    async_envs: bool = True  # EnvPool batch = envs_per_actor // 2, results scattered by env_id
    env_threads_per_actor: int = 0  # EnvPool C++ threads; 0 = one per env batch slot
    # The actor loop: "python" (a Python round trip and an inference call per `recv()`) or "xla"
    # (T env and policy steps in one jitted call through EnvPool's XLA interface, on a sync
    # pool: `acting/xla_actor.py`). An unroll still running after `actor_hang_timeout_s` (a
    # `recv` inside XLA cannot time out) stops the run.
    actor_loop: str = "python"
    # XLA loop: each actor's envs in this many sync EnvPools stepped in turn inside the unroll,
    # one group's envs stepping while the policy acts on the next group's (1 = one pool).
    env_groups_per_actor: int = 1
    actor_hang_timeout_s: float = 60.0  # an XLA-loop unroll running longer stops the run
    # A Python env's worker process has this long to import and build its envs, and again to
    # answer their first reset: a slow start, told apart from a hang (actor_hang_timeout_s),
    # stops the run in one line instead of spending restarts (docs: your-own-environment.md).
    env_start_timeout_s: float = 300.0
    # Pin each actor's EnvPool threads to cores (EnvPool's `thread_affinity_offset`): actor
    # `slot` from core `offset + slot * env threads`, wrapping; -1 = no pinning.
    env_thread_affinity_offset: int = -1
    queue_size: int = 2  # rollouts in flight per actor (back-pressure bounds policy lag)
    max_policy_lag: int = 0  # drop rollouts acted more than this many updates ago; 0 = keep all
    # Supervision: a failed actor restarts with a fresh EnvPool; more than this many restarts
    # within the window (over this process's actors) stops the run with a final checkpoint.
    actor_max_restarts: int = 3  # 0 = the first actor failure stops the run
    actor_restart_window_s: float = 600.0  # the window actor_max_restarts counts restarts in
    actor_device_ids: tuple[int, ...] = (0,)  # local devices the actors' inference runs on
    # Synchronous collection (pytorchrl's sync mode): sync EnvPools, and each actor acts every
    # unroll with params newer than its last unroll's (it waits for the learner). An update
    # goes ahead once `fraction_samples` of one unroll of every actor arrived: batch_size must
    # be that many segments; the late unrolls join the next batch, or are dropped when older
    # than max_policy_lag (counted as stats/dropped_rollouts).
    sync_collection: bool = False
    fraction_samples: float = 1.0  # sync_collection: the fraction of actors an update waits for
    # Deterministic mode: actors start new envs (seeded from the epoch) every this many updates,
    # so a resume replays at most this many unrolls of recorded actions to rebuild the envs.
    env_epoch_updates: int = 100
    # A GIF of one evaluation episode in `videos/` every this many evaluations (0 = none;
    # envs that render: EnvPool Atari, classic control through gymnasium).
    video_every_evals: int = 0
    # Simultaneous-move multi-agent tasks (Jumanji/LevelBasedForaging-v0: 2): the env's agents,
    # each a stream of the one shared policy (`envs/agents.py`); env steps count agent steps.
    agents_per_env: int = 1
    team_reward: bool = False  # agents_per_env > 1: every agent learns from the team's sum
    # Simultaneous-move tasks with several agents: the agent playing each of an env's agents.
    agent_slots: tuple[str, ...] = ()
    # The policy seam (local inference per actor, or a central server):
    # --config.sebulba.inference.client=server.
    inference: InferenceConfig = dataclasses.field(default_factory=InferenceConfig)

    def __post_init__(self):
        positive = (
            "num_actor_threads",
            "envs_per_actor",
            "queue_size",
            "actor_restart_window_s",
            "env_epoch_updates",
            "agents_per_env",
            "actor_hang_timeout_s",
            "env_start_timeout_s",
            "env_groups_per_actor",
        )
        for name in positive:
            if getattr(self, name) <= 0:
                _bad(f"sebulba.{name}", getattr(self, name), "must be > 0")
        at_least = {
            "max_policy_lag": (0, "0 keeps every rollout"),
            "actor_max_restarts": (0, "0 = no restarts"),
            "env_threads_per_actor": (0, "0 = auto"),
            "video_every_evals": (0, "0 disables it"),
            "env_thread_affinity_offset": (-1, "a core index, or -1 for no pinning"),
        }
        for name, (low, meaning) in at_least.items():
            if getattr(self, name) < low:
                _bad(f"sebulba.{name}", getattr(self, name), f"must be >= {low} ({meaning})")
        if self.async_envs and self.envs_per_actor % 2:
            _bad("sebulba.envs_per_actor", self.envs_per_actor, "must be even when async_envs=True")
        if self.team_reward and self.agents_per_env == 1:
            _bad(
                "sebulba.team_reward", True, "is read only with agents_per_env > 1; leave it False"
            )
        if not self.actor_device_ids:
            _bad("sebulba.actor_device_ids", self.actor_device_ids, "needs at least one device id")


@dataclasses.dataclass(frozen=True)
class AnakinConfig:
    """What only the Anakin engine reads: JAX envs stepped and learned from inside one jitted
    program (`jaxrl_dist/anakin`). Its learner batch is the run's `batch_size`: each seed's
    envs, one segment of `unroll_length` steps each per update."""

    num_seeds: int = 1  # independent seeds vmapped in one program

    def __post_init__(self):
        if self.num_seeds <= 0:
            _bad("anakin.num_seeds", self.num_seeds, "must be > 0")


# The engine sections by the runtime that reads them.
ENGINE_SECTIONS = {"sebulba": SebulbaConfig, "anakin": AnakinConfig}
