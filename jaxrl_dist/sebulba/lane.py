"""One agent's part of a Sebulba run (issue 40): its learner state, data seam, params store,
opponent pools, actors and log window. A one-agent run is one lane; `config.agents` makes one
per agent (`engine.py` steps them in turn, `sebulba/rotation.py`).

Each learning agent has its own actors: they play the games of `config.seats.games` that name
it, its seats as streams it learns from, the other agents' seats played inside the adapter with
those agents' current params (`AgentPlayer`, from their params stores). An agent whose
`learning_mask` bit is off has no actors, no data and no updates: its params store holds its
starting params for the others' games, unchanged to the last bit.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any, NamedTuple

import jax
import numpy as np

from jaxrl_dist.acting.actor import ActorShared, ActorStats
from jaxrl_dist.acting.fleet import Fleet
from jaxrl_dist.acting.params_store import ParamsStore
from jaxrl_dist.config import ConfigError
from jaxrl_dist.config.sections import REPLAY_RUNTIME_FIELDS
from jaxrl_dist.data.base import NOT_READY
from jaxrl_dist.data.flows import replay_tolerance, snapshot_bytes
from jaxrl_dist.learning.distributed import ProcessLostError, lost_message
from jaxrl_dist.learning.learner import Learner, host_metrics
from jaxrl_dist.run.counters import Counters
from jaxrl_dist.run.engine import check_finite
from jaxrl_dist.run.layout import Layout
from jaxrl_dist.sebulba.log_window import LogWindow
from jaxrl_dist.sebulba.resume import (
    ReplayLog,
    follow_agent,
    replay_for_actors,
    restore_replay_contents,
    seat_pools,
)


class OtherAgent(NamedTuple):
    """What an agent's actors need to play another agent's seats: its actor half, its params
    store and whether it acts greedily."""

    core: Any
    store: ParamsStore
    greedy: bool


class Lane:
    """One agent's learner, data seam, params store, pools and actors (see the module
    docstring). `layout` writes its log keys and names it in messages (`run/layout.py`)."""

    def __init__(
        self,
        prepared: Any,
        devices: Any,
        cluster: Any,
        stop_requested: threading.Event,
        obs_shape: tuple,
        layout: Layout,
    ):
        """`obs_shape`: the env's observations' (whether a replay's contents are saved)."""
        view = prepared.view
        self._obs_shape = obs_shape
        self.name, self._layout = view.name, layout
        self.prefix = layout.prefix(view.name)  # its log keys' and run-time fields' prefix
        self.config = cfg = view.config
        self.learning, self.greedy = view.learning, not view.exploring
        self.agent, self.flow, self._warm = prepared.agent, prepared.flow, prepared.warm_params
        self._devices, self._cluster = devices, cluster
        self.learner = Learner(prepared.agent.learner, devices, cfg.seed)
        self.stop_actors = threading.Event()
        self.data = None
        if self.learning:
            self.data = prepared.flow.host(
                cfg,
                num_processes=cluster.count,
                process_index=cluster.index,
                stop_writers=self.stop_actors,
                stop_reading=stop_requested,
            )
        self.store = ParamsStore(devices.actor_devices)
        self.stats = ActorStats()
        self.replay_log = None  # deterministic mode: the env actions since the epoch began
        # (a replay keeps its rounds' own, `data/lockstep_replay.py`)
        if cfg.deterministic and not prepared.flow.replays:  # another layout is not replayed
            layout = {  # named as before the sections, so older checkpoints still match
                "unroll_length": cfg.unroll_length,
                "envs_per_actor": cfg.sebulba.envs_per_actor,
                "batch_size": cfg.batch_size,
            }
            self.replay_log = ReplayLog(cfg.sebulba.env_epoch_updates, layout)
        self.state: Any = None  # the newest learner state; the one before it was donated
        self.updates = 0  # this agent's own updates (its params' version)
        self.env_steps = 0  # the env steps its actors made (all processes)
        self.last_ready = 0.0  # when its batch was last ready (monotonic; several agents poll)
        self.fleet: Fleet | None = None
        self.pools = None  # the seats' snapshot roles (opponent pool, frozen start)
        self.followers: list[Any] = []  # other agents' pools of this one's snapshots
        # Lockstep resume, by global actor: (env actions to replay, recurrent states after them)
        self.actor_replay: dict[int, tuple] = {}
        self.start_unroll: int | None = None  # a lockstep replay's round to go on from
        self.window: LogWindow | None = None
        self._actors: dict[str, Any] | None = None  # the actors' stats in this log window
        self._reported = (0, 0)  # (restarts, episodes) in the last agreement
        self.batch: Any = None  # the batch read and not yet learned from
        self._read_from = 0.0

    # ------------------------------------------------------------------ the state
    def begin(self, ckpt: Any, state: Any, updates: int, resume: bool) -> None:
        """Takes `state` (restored, or fresh: then the warm start's params go in) at `updates`
        updates; `ckpt` gives this lane's saved items (`LaneItems`)."""
        cfg, learner = self.config, self.learner
        if resume and self.data is not None:
            if self.flow.replays or self.flow.saves(cfg, self._obs_shape):
                restore_replay_contents(
                    ckpt, self.data, cfg.replay.min_size, self._cluster.is_primary
                )
            if hasattr(self.data, "epoch_replay"):  # a lockstep replay's rounds
                self.start_unroll, mine = self.data.epoch_replay()
                first = jax.process_index() * cfg.sebulba.num_actor_threads
                self.actor_replay = replay_for_actors(mine, cfg.streams_per_actor, first)
        elif not resume and self._warm is not None:
            state = learner.core.with_params(state, learner.put_state(self._warm))
        self.state, self.updates = state, updates
        params = learner.actor_params(state)
        if self.learning:
            self.pools = seat_pools(
                cfg, ckpt, params, update=updates, resume=resume, cluster=self._cluster
            )
        self._items = ckpt
        self.store.publish(params, updates)

    def follow(self, lanes: dict[str, Lane], resume: bool) -> None:
        """After every lane began: this lane's pools of the other agents' snapshots (a league
        across agents) start from their params (or come back from the checkpoint), and those
        agents offer their params to them after each update."""
        for name in sorted(self.pools.agents() if self.pools else ()):
            other = lanes[name]
            follow_agent(
                self.pools,
                name,
                self._items,
                other.policy_params(),
                update=other.updates,
                resume=resume,
                cluster=self._cluster,
            )
            other.followers.append(self.pools)

    # ------------------------------------------------------------------ run-time control
    def load_params(self, params: Any) -> None:
        """The learner takes `params` (host arrays) as a warm start would; the actors get them
        with the next publish, now."""
        learner = self.learner
        self.state = learner.core.with_params(self.state, learner.put_state(params))
        self.store.publish(learner.actor_params(self.state), self.updates)

    def replay_problem(self, settings: dict[str, float], num_processes: int) -> str | None:
        """Why this agent's replay cannot take `settings` now (one line), or None: checked as
        at the start (the config's checks, the data flow's, the rate limiter's bound)."""
        who = self._layout.who(self.name) or f"config.algorithm={self.config.algorithm!r}"
        if not self._has_replay:
            what = "learns from no replay" if self.learning else "does not learn"
            return f"{who} {what}: it has no replay settings"
        unread = [f for f in settings if f not in self.flow.reads]
        if "priority_exponent" in settings and not hasattr(self.data, "set_priority_exponent"):
            unread.append("priority_exponent")
        if unread:
            return f"replay.{unread[0]} is not used by {who}'s replay"
        try:
            config = self._with_replay(settings)
        except ConfigError as e:
            return str(e).splitlines()[0]
        return self.flow.check(config) or self.data.rate_problem(*self._rate(config, num_processes))

    def set_replay(
        self, settings: dict[str, float], num_processes: int, resumed: bool = False
    ) -> None:
        """Takes `settings` (checked by `replay_problem`) from the next read on; `resumed`:
        the settings in force when the restored replay was saved (its limiter's offset and
        its priorities, stored with that exponent, are kept as they are)."""
        self.config = self._with_replay(settings)
        self.data.set_rate(*self._rate(self.config, num_processes), resumed=resumed)
        if "priority_exponent" in settings:
            self.data.set_priority_exponent(settings["priority_exponent"], reweigh=not resumed)

    def replay_settings(self) -> dict[str, float] | None:
        """The run-time replay settings in force (what a checkpoint keeps), or None."""
        if not self._has_replay:
            return None
        return {f: getattr(self.config.replay, f) for f in REPLAY_RUNTIME_FIELDS}

    @property
    def _has_replay(self) -> bool:
        """A replay whose settings can change (a learning agent's host replay)."""
        return self.data is not None and hasattr(self.data, "set_rate")

    def resume_replay(self, saved: dict[str, float], saved_config: dict[str, Any], n: int) -> None:
        """At a resume: the replay settings in force at the checkpoint (`saved`) where they
        differ from the config's, unless this config changes that field from the saved run
        config's (`saved_config`, its replay section): the user's change for this resume."""
        replay = self.config.replay
        back = {
            f: v
            for f, v in saved.items()
            if v != getattr(replay, f) and saved_config.get(f) == getattr(replay, f)
        }
        if back and self._has_replay:
            self.set_replay(back, n, resumed=True)

    def _with_replay(self, settings: dict[str, float]) -> Any:
        return dataclasses.replace(
            self.config, replay=dataclasses.replace(self.config.replay, **settings)
        )

    def _rate(self, config: Any, num_processes: int) -> tuple[float, float]:
        """The replay's (samples per item, tolerance) for `config`, as built at the start."""
        per_segment = self.data.items_per_segment
        spi = config.replay.samples_per_insert
        return spi, replay_tolerance(config, num_processes, per_segment)

    def items(self) -> dict[str, bytes]:
        """This process's checkpoint items: the replay's contents and the opponent pools."""
        items = {}
        if self.data is not None and self.flow.saves(self.config, self._obs_shape):
            items["data"] = snapshot_bytes(self.data)
        if self.pools:
            items["pool"] = self.pools.to_bytes()
        return items

    def policy_params(self) -> Any:
        return self.learner.actor_params(self.state)

    def eval_params(self) -> Any:
        """The params store's copy on the first actor device (never donated)."""
        return self.store.get(self._devices.actor_devices[0])[0]

    # ------------------------------------------------------------------ acting
    def start(self, start_update: int, others: dict[str, OtherAgent], env_steps: int) -> None:
        """Starts this lane's actors (none when it does not learn)."""
        self.window = LogWindow(env_steps)
        if not self.learning:
            return
        cfg = self.config
        shared = ActorShared(
            write=self.data.write,
            stop=self.stop_actors,
            stats=self.stats,
            unroll_length=cfg.unroll_length,
            segments_per_rollout=cfg.rollout_segments(jax.process_count()),
            sync=cfg.sebulba.sync_collection,
            version_for=getattr(self.data, "version_for", None),
        )
        self.fleet = Fleet(
            cfg,
            self.agent.actor,
            self._devices.actor_devices,
            self.store,
            shared,
            start_update=start_update,
            replay=self.actor_replay,
            start_unroll=self.start_unroll,
            pools=self.pools,
            others=others,
            greedy=self.greedy,
        )
        self.data.check_actors = self.fleet.check

    def other(self) -> OtherAgent:
        """This agent as the others' actors see it."""
        return OtherAgent(self.agent.actor, self.store, self.greedy)

    def stop(self, timeout_s: float) -> None:
        self.stop_actors.set()
        if self.fleet is not None:
            self.fleet.join(timeout_s=timeout_s)

    # ------------------------------------------------------------------ learning
    def read(self, wait: bool) -> Any:
        """Reads this lane's next batch into `self.batch` (kept until `advance`): the batch, or
        `NOT_READY` (without waiting), None at a stop; RunError from the actors."""
        if self.batch is None or self.batch is NOT_READY:
            if self.batch is None:
                self._read_from = time.perf_counter()
            # A one-agent run waits (a flow of research code may not take `wait`).
            updates = self.updates
            self.batch = self.data.read(updates) if wait else self.data.read(updates, wait=False)
        return self.batch

    def counts(self) -> tuple[int, int]:
        """(restarts, episodes) of this lane's actors since the last call; drains the actors'
        stats into the log window's (taken when a batch came: in lockstep mode the actors then
        wait for the next params, so the window holds exactly the unrolls learned so far)."""
        self._actors = self.stats.drain(into=self._actors)
        restarts = self.fleet.restarts if self.fleet is not None else 0
        now = (restarts, self.stats.episodes_finished)
        before, self._reported = self._reported, now
        return now[0] - before[0], now[1] - before[1]

    def advance(self) -> dict[str, float]:
        """One update from the batch read; publishes the new params (to the pools too)."""
        batch, self.batch = self.batch, None
        t1 = time.perf_counter()
        if self.replay_log is not None:
            self.replay_log.record(self.updates, batch.env_actions, batch.memory)
        self.window.lags.append(self.updates - float(np.mean(batch.data.policy_version)))
        device_batch = self.learner.put_batch(batch.data)
        t2 = time.perf_counter()
        metrics, priorities = self._update(device_batch)
        if priorities is not None:  # a prioritized replay takes them back
            self.data.update_priorities(batch.sample_ids, self.learner.process_rows(priorities))
        t3 = time.perf_counter()
        self.updates += 1
        params = self.learner.actor_params(self.state)
        self.store.publish(params, self.updates)
        if self.pools:  # self-play opponents: a snapshot every pool_every_updates
            self.pools.offer(params, self.updates)
        for pools in self.followers:  # the other agents' leagues of this one
            pools.offer(params, self.updates, self.name)
        self.window.add_timers(
            queue_get_s=t1 - self._read_from,  # the read, the agreement and its requests
            transfer_s=t2 - t1,
            update_s=t3 - t2,
            publish_s=time.perf_counter() - t3,
        )
        return metrics

    def _update(self, device_batch: Any) -> tuple[dict[str, float], Any]:
        """One update of the learner state (donated) -> (metrics, the batch's priorities or
        None); raises NonFiniteError on a bad metric, before anything is published."""
        try:
            new_state, metrics, priorities = self.learner.update(self.state, device_batch)
            metrics = host_metrics(metrics)
        except jax.errors.JaxRuntimeError as e:
            if self._cluster.count == 1:
                raise
            raise ProcessLostError(lost_message(e)) from None
        who = self._layout.who(self.name)
        where = f"at update {self.updates + 1}" + (f" of {who}" if who else "")
        check_finite(metrics, where)  # the state before was donated
        self.state = new_state
        return metrics, priorities

    def window_totals(self) -> np.ndarray:
        """This process's log window (`LogWindow.totals`)."""
        actors, self._actors = self._actors or self.stats.drain(), None
        return self.window.totals(actors, self.data.size if self.data is not None else 0)

    def record(self, metrics: dict[str, float], counters: Counters, rows: np.ndarray) -> dict:
        """The log record of this lane from every process's `window_totals` (`rows`), its keys
        prefixed; `counters` the run's (this lane's updates replace the run's)."""
        self.env_steps += int(np.atleast_2d(rows)[:, 0].sum())  # actor_env_steps
        counters = self._layout.counters(counters, self.updates, self.env_steps)
        record = self.window.record(metrics, counters, rows)
        if self.fleet is not None:
            record.update(self.fleet.inference_record())
        return self._layout.keyed(self.name, record)


def saved_replay(config: dict[str, Any], name: str) -> dict[str, Any]:
    """Agent `name`'s replay section of a checkpoint's run config (`meta["config"]`)."""
    for agent in config.get("agents", ()):
        if agent["name"] == name:
            return agent.get("replay", {})
    return config.get("replay", {})
