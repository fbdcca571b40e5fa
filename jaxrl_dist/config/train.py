"""The typed run configuration (`TrainConfig`) and its checks: every `__post_init__` failure
is a `ConfigError` with one line naming the field and the fix."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from jaxrl_dist.agents.intrinsic.config import IntrinsicConfig
from jaxrl_dist.config.agents import agents_problem
from jaxrl_dist.config.engine_sections import AnakinConfig, SebulbaConfig
from jaxrl_dist.config.engines import ENGINES
from jaxrl_dist.config.errors import ConfigError, fail
from jaxrl_dist.config.sections import ReplayConfig, SeatsConfig, WandbConfig
from jaxrl_dist.config.train_checks import (
    check_actor_loop,
    check_collection,
    check_evaluation,
)
from jaxrl_dist.networks import NetworkConfig

EVAL_MODES = ("greedy", "sampled", "both")
# Nested sections besides the agent's own `algo`: --config.<section>.<field>=value.
SECTIONS = {
    "network": NetworkConfig,
    "intrinsic": IntrinsicConfig,
    "sebulba": SebulbaConfig,
    "anakin": AnakinConfig,
    "replay": ReplayConfig,
    "seats": SeatsConfig,
    "wandb": WandbConfig,
}


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Everything about a run that is not the algorithm's own hyperparameters.

    `algo` is the algorithm's own frozen config (its class comes from the algorithm registry, so
    this module does not know which algorithms exist); `network` is shared by actor-critic
    algorithms.
    """

    algorithm: str = "impala"  # the registered agent: impala, ppo, rainbow, r2d2
    # An EnvPool id, gymnasium:ID or pettingzoo:module:factory (Sebulba); a gymnax or pgx id or
    # jax:module:factory (Anakin). docs/guides/your-own-environment.md.
    env_id: str = "CartPole-v1"
    env_kwargs: dict = dataclasses.field(default_factory=dict)  # for the env's maker
    # Evaluation's own env ("": the training env); the policy must take both envs' spaces.
    eval_env_id: str = ""
    eval_env_kwargs: dict | None = None  # over the training env's kwargs; with eval_env_id: its
    seed: int = 0  # the root of every random stream (params, envs, evaluation)
    # "sebulba": EnvPool envs stepped by actor threads feeding a separate learner; "anakin":
    # JAX envs (gymnax) stepped and learned from inside one jitted function (`jaxrl_dist/anakin`),
    # `batch_size` envs of `unroll_length` steps per update, `anakin.num_seeds` seeds vmapped.
    # Each reads its own section (`config.sebulba`, `config.anakin`).
    runtime: str = "sebulba"
    # CPython's GIL switch interval during the run (`sys.setswitchinterval`; 0 keeps Python's
    # 5 ms): a thread waiting for the GIL beside one running Python waits up to this long.
    switch_interval_s: float = 0.0
    unroll_length: int = 20  # T
    # The learner's batch: segments of T transitions per update. Sebulba: from all actors of
    # all processes; Anakin: each seed's envs, one segment each.
    batch_size: int = 32
    learner_device_ids: tuple[int, ...] = ()  # empty = every local device
    # Stopping: the first of these (0 = no limit) ends the run.
    total_env_steps: int = 1_000_000
    total_episodes: int = 0  # training episodes finished by all actors
    max_wall_time_s: float = 0.0  # stop after this many wall seconds (resumes included)
    stop_at_eval_return: float | None = None  # stop once an evaluation reaches this return
    # At most this many updates a second for each agent's learner (the SEED trainer's
    # max_train_frequency): Sebulba's learner waits (several agents: each its own); Anakin runs
    # chunks of at most a second's updates and waits between them. None = no cap.
    max_updates_per_s: float | None = None
    # Run-time hyperparameter schedules, {name: spec}: each value is its run-time base value
    # times an optax schedule over the run's updates, e.g. {"learning_rate": "cosine:warmup=0.05",
    # "entropy_cost": "linear:end=0.1"} (`jaxrl_dist/schedules.py` lists the specs).
    schedules: dict = dataclasses.field(default_factory=dict)
    # Evaluation on separate EnvPools with their own seeds.
    eval_every_updates: int = 100  # 0 = only at the end
    # Or every this many training episodes (all actors, all seeds), with eval_every_updates=0:
    # at the first update after the count crosses a multiple.
    eval_every_episodes: int = 0
    eval_episodes: int = 20  # episodes per evaluation
    # The envs that play them (0: one per episode); env e plays episodes e, e + eval_envs, ...
    eval_envs: int = 0
    eval_mode: str = "greedy"  # "greedy", "sampled" or "both"
    # What ranks evaluations (the best so far, best saves, the hooks' metric): "return" is
    # `Hooks.reward_metric` of the returns (default: their mean); or a statistic the
    # evaluation reports, e.g. "return_worst_seat" (a seated game: the learner's weaker seat).
    eval_metric: str = "return"
    # Evaluate in a thread on a snapshot of the params while updates go on (results logged at
    # the snapshot's env steps), or block the learner (the old way); None = in the background
    # except in deterministic mode, where stops and best saves must not depend on timing.
    eval_in_background: bool | None = None
    # Background evaluation plays at most this share of the wall time: after an evaluation of
    # d seconds it rests d * (1 / share - 1) (the newest request meanwhile waits); 1 = no rest.
    eval_background_share: float = 1.0
    # Checkpoints: a save when any interval is due (0 disables that interval), and at the end.
    checkpoint_every_updates: int = 500
    checkpoint_every_env_steps: int = 0  # save every this many env steps
    checkpoint_every_s: float = 0.0  # save every this many wall seconds
    # Retention: the newest `keep_checkpoints` steps.
    keep_checkpoints: int = 3
    # The params of the best evaluations, in checkpoints/best/: when one beats the best so far,
    # the params it played are written at the update they were taken (run/best.py); this many
    # of highest metric are kept (0 = no best saves: `--step best` and `RUN@best` are refused).
    keep_best_checkpoints: int = 1
    # Logs, and `learning_curve.png` in the work dir at the end (scripts/plot.py draws it any time).
    log_every_updates: int = 10
    learning_curve: bool = True  # draw learning_curve.png at the end
    warm_start: str = ""  # RUN[@latest|@best|@STEP] (a work or checkpoint dir): its params
    # Deterministic mode: sync EnvPools, each update takes one unroll of every actor, acted with
    # the newest params (actors wait for the learner), batched in actor order. Slower; the data,
    # and so the run, do not depend on thread timing or on how actors are spread over processes.
    deterministic: bool = False
    network: NetworkConfig = dataclasses.field(default_factory=NetworkConfig)
    # An intrinsic reward (RND) learned beside an actor-critic agent, with its own value head;
    # `pretraining` learns from it alone (docs/guides/intrinsic-rewards.md).
    intrinsic: IntrinsicConfig = dataclasses.field(default_factory=IntrinsicConfig)
    # The replay's settings (agents that learn from a replay): --config.replay.capacity=...
    replay: ReplayConfig = dataclasses.field(default_factory=ReplayConfig)
    # Turn-based games: who plays each seat (`config.seats.games`); empty for other envs.
    seats: SeatsConfig = dataclasses.field(default_factory=SeatsConfig)
    # Weights & Biases (`pip install -e '.[wandb]'`): off unless config.wandb.project is set.
    wandb: WandbConfig = dataclasses.field(default_factory=WandbConfig)
    # The engines' own sections (`config/engine_sections.py`): Sebulba's actors, EnvPools,
    # queue, restarts and inference; Anakin's seeds. Another runtime's section is refused.
    sebulba: SebulbaConfig = dataclasses.field(default_factory=SebulbaConfig)
    anakin: AnakinConfig = dataclasses.field(default_factory=AnakinConfig)
    algo: Any = None
    # Several learning agents in one run (`config/agents.py`): named sections, each with its
    # own algorithm, algo, network, replay, schedules, batch_size and warm_start (the top-level
    # ones then stay unset); seats name the agents. Empty: one agent, the top-level fields.
    agents: tuple = ()
    learning_mask: tuple[bool, ...] = ()  # per agent: False plays its params, never updated
    exploration_mask: tuple[bool, ...] = ()  # per agent: False acts greedily (Q: epsilon 0)

    def __post_init__(self):
        positive = (
            "unroll_length",
            "batch_size",
            "total_env_steps",
            "eval_episodes",
            "keep_checkpoints",
            "log_every_updates",
        )
        for name in positive:
            if getattr(self, name) <= 0:
                fail(name, getattr(self, name), "must be > 0")
        if not 0 <= self.seed < 2**32:
            fail("seed", self.seed, "must be in [0, 2**32)")
        cap = self.max_updates_per_s
        if cap is not None and not (math.isfinite(cap) and cap > 0):
            fail("max_updates_per_s", cap, "must be a number > 0 (none: no cap)")
        if self.switch_interval_s < 0:
            fail("switch_interval_s", self.switch_interval_s, "must be >= 0 (0 = Python's own)")
        nonnegative = (
            "max_wall_time_s",
            "eval_every_updates",
            "eval_every_episodes",
            "eval_envs",
            "checkpoint_every_updates",
            "checkpoint_every_env_steps",
            "checkpoint_every_s",
            "keep_best_checkpoints",
            "total_episodes",
        )
        for name in nonnegative:
            if getattr(self, name) < 0:
                fail(name, getattr(self, name), "must be >= 0 (0 disables it)")
        if self.eval_mode not in EVAL_MODES:
            fail("eval_mode", self.eval_mode, f"must be one of {EVAL_MODES}")
        if self.sebulba.agents_per_env > 1 and self.seats.enabled:
            fail(
                "sebulba.agents_per_env",
                self.sebulba.agents_per_env,
                "> 1 is for simultaneous-move envs; config.seats is for turn-based games, "
                "where one player moves at a time (set one of them)",
            )
        problem = agents_problem(self)
        problem = problem or (None if self.agents else self.seats.role_problem())
        if problem:
            raise ConfigError(problem)
        check_actor_loop(self)
        self._check_runtime()
        check_collection(self)
        check_evaluation(self)

    def ends_at(self, env_steps: int, episodes: int) -> str:
        """Why a run at these counts has reached its length ("" if it has not)."""
        if env_steps >= self.total_env_steps:
            return "total_env_steps reached"
        if self.total_episodes and episodes >= self.total_episodes:
            return "total_episodes reached"
        return ""

    def evaluates_in_background(self, engine_default: bool) -> bool:
        """Whether evaluation runs beside the updates (`eval_in_background`, resolved: by
        default where the engine's default is to (`Engine.evaluates_beside_by_default`),
        except in deterministic mode, where stops must not depend on timing, and without
        evaluations during the run: the final one blocks anyway)."""
        if self.eval_in_background is None:
            return (
                engine_default
                and bool(self.eval_every_updates or self.eval_every_episodes)
                and not self.deterministic
            )
        return self.eval_in_background

    def sync_batch_size(self, num_processes: int = 1) -> int:
        """Synchronous collection: the segments of `fraction_samples` of one unroll of every
        actor (rounded up to whole actors), what `batch_size` must be."""
        s = self.sebulba
        actors = num_processes * s.num_actor_threads
        return math.ceil(s.fraction_samples * actors) * self.streams_per_actor

    def _check_runtime(self) -> None:
        """The runtime is a registered engine; what it refuses is checked before the run
        (`run/engine.py`: each engine's `refuses`)."""
        if self.runtime not in ENGINES:
            fail("runtime", self.runtime, f"must be one of {tuple(ENGINES)}")

    @property
    def num_eval_envs(self) -> int:
        """The envs that play an evaluation's episodes (`eval_envs`; 0: one per episode)."""
        return self.eval_envs or self.eval_episodes

    @property
    def eval_env(self) -> tuple[str, dict]:
        """(env id, env kwargs) of evaluation (`eval_env_of`)."""
        return eval_env_of(self.env_id, self.env_kwargs, self.eval_env_id, self.eval_env_kwargs)

    @property
    def own_eval_env(self) -> bool:
        """Whether evaluation plays another env than the training env."""
        return self.eval_env != (self.env_id, dict(self.env_kwargs))

    @property
    def replay_batch_size(self) -> int:
        """What a replay's learner samples per update: `replay.batch_size`, 0 meaning
        `batch_size` (the Sebulba learner's batch; on Anakin the envs of a seed)."""
        return self.replay.batch_size or self.batch_size

    @property
    def streams_per_actor(self) -> int:
        """The rows each actor acts for: its envs, with `seats` its learner seats' streams, or
        with `agents_per_env` its envs' agents."""
        if self.seats.enabled:
            return self.seats.streams(self.sebulba.envs_per_actor)
        return self.sebulba.envs_per_actor * self.own_slots

    @property
    def recv_rows(self) -> int:
        """The most rows one actor's `recv()` returns: its env batch, each env's agents, or with
        `seats` every learner stream (a seated game's `recv()` can return all of them)."""
        if self.seats.enabled:
            return self.streams_per_actor
        return self.env_batch_size * self.own_slots

    @property
    def own_slots(self) -> int:
        """The agents of each env the learner plays: all of them, or in an agent's view of a
        run of several (`config/agents.py`) its own `agent_slots`."""
        if self.sebulba.agent_slots:
            return sum(slot == "learner" for slot in self.sebulba.agent_slots)
        return self.sebulba.agents_per_env

    @property
    def env_batch_size(self) -> int:
        """Envs returned by one EnvPool `recv()` (one inference call of an actor)."""
        s = self.sebulba
        return s.envs_per_actor // 2 if s.async_envs else s.envs_per_actor

    def process_batch_size(self, num_processes: int = 1) -> int:
        """Segments each process's actors feed into one update."""
        return self.batch_size // num_processes

    def rollout_segments(self, num_processes: int = 1) -> int:
        """Segments in one actor rollout: `gcd(process batch, env_batch_size)`, so a learner batch
        is whole rollouts while the env batch (the actors' inference batch, which sets their
        speed) and the learner batch (which sets learning) are chosen independently. With
        several agents per env, the env batch's streams: an unroll is one rollout."""
        rows = self.env_batch_size if self.seats.enabled else self.recv_rows
        return math.gcd(self.process_batch_size(num_processes), rows)

    def process_problem(self, num_processes: int) -> str | None:
        """What does not fit `num_processes` processes (one line with the fix), or None."""
        if self.batch_size % num_processes:
            return (
                f"config.batch_size={self.batch_size} does not split over {num_processes} "
                f"processes; make config.batch_size a multiple of {num_processes}"
            )
        return None

    def collected_batch_problem(self, num_processes: int) -> str | None:
        """A learner batch that is not the unrolls an update collects (one line with the fix),
        or None: deterministic mode takes one unroll of every actor, synchronous collection
        `fraction_samples` of them. The on-policy flow's rule: a replay samples its batch
        (`data/lockstep_replay.py`) and is not collected synchronously."""
        s, streams = self.sebulba, max(1, self.streams_per_actor)  # 0: a run of several agents
        want = num_processes * s.num_actor_threads * streams
        if self.deterministic and self.batch_size != want:
            return (
                f"config.batch_size={self.batch_size}: deterministic=True takes one unroll of "
                f"every actor per update ({num_processes} processes x {s.num_actor_threads} "
                f"actor threads x {self._rows(streams)}); fix it with config.batch_size={want}"
            )
        sync = self.sync_batch_size(num_processes)
        if s.sync_collection and self.batch_size != sync:
            return (
                f"config.batch_size={self.batch_size}: sync_collection with fraction_samples="
                f"{s.fraction_samples} takes the unrolls of the first "
                f"{sync // streams} of {num_processes * s.num_actor_threads} "
                f"actors ({self._rows(streams)} each) per update; fix it with "
                f"config.batch_size={sync}"
            )
        return None

    def _rows(self, n: int) -> str:
        return f"{n} envs" if n == self.sebulba.envs_per_actor else f"{n} streams"

    @property
    def steps_per_update(self) -> int:
        return self.batch_size * self.unroll_length

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def eval_env_of(
    env_id: str, env_kwargs: dict, eval_env_id: str = "", eval_env_kwargs: dict | None = None
) -> tuple[str, dict]:
    """(env id, env kwargs) evaluation plays: the training env with `eval_env_kwargs` over its
    own kwargs (train with clipped rewards, evaluate unclipped), or `eval_env_id` with
    `eval_env_kwargs` alone. `config.eval_env` and `scripts/evaluate.py`'s flags alike."""
    if eval_env_id:
        return eval_env_id, dict(eval_env_kwargs or {})
    return env_id, {**env_kwargs, **(eval_env_kwargs or {})}
