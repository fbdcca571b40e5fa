"""The Sebulba engine: EnvPool actor threads feed the data seam, the learner updates on the mesh
and publishes params back to the actors (DeepMind's Podracer paper, "Sebulba").

One step is one update. `prepare` reads this process's batch from the data seam (the only
wait); after every process agreed to go on, `advance` learns from it and publishes the new
params (and offers them to the seats' opponent pools). Only the main thread updates and saves.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import jax
import numpy as np

from jaxrl_dist.acting.actor import ActorShared, ActorStats
from jaxrl_dist.acting.fleet import Fleet
from jaxrl_dist.acting.params_store import ParamsStore
from jaxrl_dist.config import ConfigError
from jaxrl_dist.data.flows import snapshot_bytes
from jaxrl_dist.envs import check_env, env_spec, xla_loop_problem
from jaxrl_dist.envs.envpool_env import xla_device_problem
from jaxrl_dist.envs.sources import is_python_env, worker_layout_problem
from jaxrl_dist.errors import RunError
from jaxrl_dist.learning.distributed import Cluster, ProcessLostError, lost_message
from jaxrl_dist.learning.learner import Learner, host_metrics
from jaxrl_dist.run.checkpoint import tree_digest
from jaxrl_dist.run.counters import Counters
from jaxrl_dist.run.engine import Engine, Ready, Saved, Stepped, check_finite
from jaxrl_dist.run.evaluator import EvalSetup
from jaxrl_dist.run.preflight import (
    Prepared,
    eval_env_problem,
    learner_devices,
    multi_agent_problem,
)
from jaxrl_dist.sebulba.evaluation import make_evaluator
from jaxrl_dist.sebulba.fields import REFUSES, USES
from jaxrl_dist.sebulba.log_window import LogWindow
from jaxrl_dist.sebulba.resume import (
    ReplayLog,
    put_replay,
    replay_for_actors,
    restore_checkpoint,
    restore_replay_contents,
    seat_pools,
)
from jaxrl_dist.sebulba.videos import EvalVideos, video_problem

ACTOR_JOIN_TIMEOUT_S = 10.0  # at a stop, for all actors together


class SebulbaEngine(Engine):
    """Actors, the data seam, the learner and the params store of this process."""

    name = "sebulba"
    uses = USES
    refuses = REFUSES
    evaluates_beside_by_default = True  # a Python evaluator beside the learner thread

    @classmethod
    def machine(cls, config: Any) -> tuple[Any, Any]:
        """EnvPool's registry, the process count, the XLA loop, the devices, the seats or
        agents, GIFs (the env must render here); ConfigError."""
        problem = check_env(config.env_id, config.env_kwargs)
        problem = problem or config.process_problem(jax.process_count())
        if not problem and config.actor_loop == "xla":
            problem = xla_loop_problem(config.env_id, config.env_kwargs)
        if not problem and is_python_env(config.env_id):
            problem = worker_layout_problem(
                config.envs_per_actor, config.env_batch_size, config.env_threads_per_actor
            )
        if not problem and is_python_env(config.env_id) and config.env_thread_affinity_offset >= 0:
            problem = (
                f"config.env_thread_affinity_offset={config.env_thread_affinity_offset} pins "
                f"EnvPool's threads; {config.env_id} runs in worker processes: set it to -1"
            )
        if problem:
            raise ConfigError(problem)
        devices = learner_devices(config)
        if config.actor_loop == "xla":
            problem = xla_device_problem(d.platform for d in devices.actor_devices)
            if problem:
                raise ConfigError(problem)
        spec = env_spec(config.env_id, config.env_kwargs)
        problem = multi_agent_problem(config, spec) or video_problem(config)
        problem = problem or eval_env_problem(config, spec, check_env, env_spec)
        if problem:
            raise ConfigError(problem)
        return spec, devices

    @classmethod
    def problem(cls, config: Any, flow: Any) -> str | None:
        """The data flow's host checks; lockstep actors need sync EnvPools; the inference
        server's batch holds at least one actor's recv()."""
        problem = flow.host_problem(config)
        if not problem and config.deterministic and config.async_envs:
            problem = "config.async_envs=True must be False when deterministic=True"
        batch = config.inference.batch_size
        if (
            not problem
            and config.inference.client == "server"
            and 0 < batch < config.env_batch_size
        ):
            problem = (
                f"config.inference.batch_size={batch} is smaller than one actor's recv() batch "
                f"({config.env_batch_size} envs); make it at least that"
            )
        return problem

    def __init__(
        self, config: Any, prepared: Prepared, cluster: Cluster, stop_requested: threading.Event
    ):
        """`stop_requested` ends the learner's waits for data; the actors' waits end when the
        engine `stop`s."""
        super().__init__(config, prepared, cluster)
        self.learner = Learner(prepared.agent.learner, prepared.devices, config.seed)
        self._stop_actors = threading.Event()
        self.data = prepared.flow.host(
            config,
            num_processes=cluster.count,
            process_index=cluster.index,
            stop_writers=self._stop_actors,
            stop_reading=stop_requested,
        )
        self.store = ParamsStore(prepared.devices.actor_devices)
        self.stats = ActorStats()
        self.replay_log = None  # deterministic mode: the env actions since the epoch began
        if config.deterministic:  # a checkpoint of another layout is not replayed
            fields = ("unroll_length", "envs_per_actor", "batch_size")
            layout = {field: getattr(config, field) for field in fields}
            self.replay_log = ReplayLog(config.env_epoch_updates, layout)
        self.state: Any = None  # the newest learner state; the one before it was donated
        self.fleet: Fleet | None = None
        self.pools = None  # the seats' snapshot roles (opponent pool, frozen start)
        self._actor_replay: dict[int, np.ndarray] = {}  # lockstep resume, by global actor
        self._window: LogWindow | None = None
        self._actors: dict[str, Any] | None = None  # the actors' stats in this log window
        self._reported = (0, 0)  # (restarts, episodes) in the last agreement
        self._batch, self._read_from = None, 0.0

    def saved_abstract(self) -> Any:
        return jax.eval_shape(self.agent.learner.init, jax.random.PRNGKey(0))

    # ------------------------------------------------------------------ the state
    def begin(self, ckpt: Any, resume: bool) -> dict[str, Any] | None:
        cfg, cluster, learner = self.config, self._cluster, self.learner
        state, meta = learner.init_state(), None
        if resume:
            columns = cfg.process_batch_size(cluster.count)
            columns = slice(cluster.index * columns, (cluster.index + 1) * columns)
            state, meta, full = restore_checkpoint(ckpt, state, self.replay_log, columns)
            if self._flow.replays or self._flow.saves(cfg, self.spec.obs_shape):
                restore_replay_contents(ckpt, self.data, cfg.replay.min_size, cluster.is_primary)
            self._actor_replay = replay_for_actors(full, cfg.envs_per_actor)
        elif self._warm_params is not None:
            state = learner.core.with_params(state, learner.put_state(self._warm_params))
        self.state = state
        update = 0 if meta is None else Counters.from_meta(meta).updates
        params = learner.actor_params(state)
        self.pools = seat_pools(cfg, ckpt, params, update=update, resume=resume, cluster=cluster)
        self.store.publish(params, update)
        return meta

    def saved(self, step: int) -> Saved:
        meta, replay, items = {}, None, {}
        window = self.replay_log.window(step) if self.replay_log is not None else None
        if window is not None:
            meta["replay"] = self.replay_log.meta(step)
            replay = put_replay(window, self.devices.batch_sharding(axis=2))
        if self._flow.saves(self.config, self.spec.obs_shape):
            items["data"] = snapshot_bytes(self.data)
        if self.pools:
            items["pool"] = self.pools.to_bytes()
        return Saved(self.state, meta, replay, items)

    def policy_params(self) -> Any:
        return self.learner.actor_params(self.state)

    def eval_params(self) -> Any:
        """The params store's copy on the first actor device (never donated)."""
        return self.store.get(self.devices.actor_devices[0])[0]

    def digests(self) -> tuple[str, str]:
        return tree_digest(self.policy_params()), tree_digest(self.state)

    def hparams(self) -> dict[str, Any]:
        return self.learner.core.hparams(self.state)

    def set_hparams(self, hparams: dict[str, Any]) -> None:
        self.state = self.learner.core.with_hparams(self.state, self.learner.put_state(hparams))

    # ------------------------------------------------------------------ the run
    def evaluator(self, in_background: bool, workdir: str) -> tuple[Any, Any]:
        cfg = self.config
        setup = EvalSetup(
            *cfg.eval_env,
            cfg.eval_episodes,
            cfg.seed,
            self.agent.actor,
            self.devices.actor_devices[0],
        )
        evaluator = make_evaluator(
            setup,
            num_players=self.spec.num_players,
            opponent=cfg.seats.eval_opponent,
            num_agents=self.spec.num_agents,
            in_xla=in_background,
        )
        videos = EvalVideos(cfg, self.agent, self.spec, workdir) if cfg.video_every_evals else None
        return evaluator, videos

    def start(self, counters: Counters) -> None:
        cfg = self.config
        shared = ActorShared(
            write=self.data.write,
            stop=self._stop_actors,
            stats=self.stats,
            unroll_length=cfg.unroll_length,
            segments_per_rollout=cfg.rollout_segments(jax.process_count()),
            sync=cfg.sync_collection,
        )
        self.fleet = Fleet(
            cfg,
            self.agent.actor,
            self.devices.actor_devices,
            self.store,
            shared,
            start_update=counters.updates,
            replay=self._actor_replay,
            pools=self.pools,
        )
        self.data.check_actors = self.fleet.check
        self._window = LogWindow(counters.env_steps)

    def prepare(self, budget: int, at_update: int) -> Ready:
        """One update: reads this process's batch (None once a stop was asked for: the data
        seam reads the run's stop flag), and what the actors counted since the last agreement."""
        self._read_from = time.perf_counter()  # queue_get_s: from here to the update's start
        try:
            batch, failure = self.data.read(at_update), None
        except RunError as e:
            batch, failure = None, e
        self._batch = batch
        # Taken when the batch came: in lockstep mode the actors then wait for the next params,
        # so the log window holds exactly the unrolls learned so far (not a racing one).
        self._actors = self.stats.drain(into=self._actors)
        restarts, episodes = self.fleet.restarts, self.stats.episodes_finished
        before, self._reported = self._reported, (restarts, episodes)
        ready = Ready(restarts=restarts - before[0], episodes=episodes - before[1])
        if batch is None:
            return ready._replace(stopped=True, failure=failure)
        return ready._replace(env_steps=batch.env_steps, dropped=batch.dropped)

    def advance(self, updates: int, at_update: int) -> Stepped:
        batch, self._batch = self._batch, None
        t1 = time.perf_counter()
        if self.replay_log is not None:
            self.replay_log.record(at_update, batch.env_actions)
        self._window.lags.append(at_update - float(np.mean(batch.data.policy_version)))
        device_batch = self.learner.put_batch(batch.data)
        t2 = time.perf_counter()
        metrics, priorities = self._update(device_batch, at_update)
        if priorities is not None:  # a prioritized replay takes them back
            self.data.update_priorities(batch.sample_ids, self.learner.process_rows(priorities))
        t3 = time.perf_counter()
        params = self.learner.actor_params(self.state)
        self.store.publish(params, at_update + 1)
        if self.pools:  # self-play opponents: a snapshot every pool_every_updates
            self.pools.offer(params, at_update + 1)
        self._window.add_timers(
            queue_get_s=t1 - self._read_from,  # the read, the agreement and its requests
            transfer_s=t2 - t1,
            update_s=t3 - t2,
            publish_s=time.perf_counter() - t3,
        )
        return Stepped(metrics)

    def _update(self, device_batch: Any, at_update: int) -> tuple[dict[str, float], Any]:
        """One update of the learner state (donated) -> (metrics, the batch's priorities or
        None); raises NonFiniteError on a bad metric, before anything is published."""
        try:
            new_state, metrics, priorities = self.learner.update(self.state, device_batch)
            metrics = host_metrics(metrics)
        except jax.errors.JaxRuntimeError as e:
            if self._cluster.count == 1:
                raise
            raise ProcessLostError(lost_message(e)) from None
        check_finite(metrics, f"at update {at_update + 1}")  # the state before was donated
        self.state = new_state
        return metrics, priorities

    def log_record(self, metrics: dict[str, float], counters: Counters) -> dict[str, float]:
        """Every process's window (a gather) as one record; this process's servers."""
        actors, self._actors = self._actors or self.stats.drain(), None
        totals = self._window.totals(actors, self.data.size)
        record = self._window.record(metrics, counters, self._cluster.gather(totals))
        record.update(self.fleet.inference_record())
        return record

    def stop(self) -> None:
        self._stop_actors.set()
        if self.fleet is not None:
            self.fleet.join(timeout_s=ACTOR_JOIN_TIMEOUT_S)
