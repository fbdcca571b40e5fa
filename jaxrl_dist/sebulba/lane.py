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

import threading
import time
from typing import Any, NamedTuple

import jax
import numpy as np

from jaxrl_dist.acting.actor import ActorShared, ActorStats
from jaxrl_dist.acting.fleet import Fleet
from jaxrl_dist.acting.params_store import ParamsStore, RoundParams
from jaxrl_dist.data.base import NOT_READY
from jaxrl_dist.data.flows import snapshot_bytes
from jaxrl_dist.learning.distributed import ProcessLostError, lost_message
from jaxrl_dist.learning.learner import Learner, host_metrics
from jaxrl_dist.run.counters import Counters
from jaxrl_dist.run.engine import check_finite
from jaxrl_dist.run.layout import Layout
from jaxrl_dist.sebulba.agent_lockstep import AgentLockstep
from jaxrl_dist.sebulba.lane_replay import ReplayControl
from jaxrl_dist.sebulba.log_window import LogWindow
from jaxrl_dist.sebulba.resume import (
    LaneReplayLog,
    ReplayLog,
    follow_agent,
    replay_for_actors,
    restore_replay_contents,
    seat_pools,
)
from jaxrl_dist.types import local_replica


class OtherAgent(NamedTuple):
    """What an agent's actors need to play another agent's seats: its actor half, its params
    store, whether it acts greedily and, in deterministic mode, its params by round (None for
    an agent that does not learn: its params never change)."""

    core: Any
    store: ParamsStore
    greedy: bool
    rounds: RoundParams | None = None  # deterministic mode: its params by round


class Lane(ReplayControl):
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
        several = len(layout.names) > 1
        if cfg.deterministic and not prepared.flow.replays:  # another layout is not replayed
            replay_layout = {  # named as before the sections, so older checkpoints still match
                "unroll_length": cfg.unroll_length,
                "envs_per_actor": cfg.sebulba.envs_per_actor,
                "batch_size": cfg.batch_size,
            }
            log_class = LaneReplayLog if several else ReplayLog
            self.replay_log = log_class(cfg.sebulba.env_epoch_updates, replay_layout)
        # Among several agents, its params by round for the others' lockstep actors.
        self.lockstep: AgentLockstep | None = None
        if cfg.deterministic and several and self.learning:
            self.lockstep = AgentLockstep(cfg.sebulba.env_epoch_updates, self.replay_log)
        if cfg.deterministic and prepared.flow.replays and self.learning:
            self.data.on_round = self._round_begins
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
        if resume and self.lockstep is not None:
            mine = self.lockstep.restore(ckpt, jax.device_get(local_replica(params)), updates)
            if mine is not None:
                first = jax.process_index() * cfg.sebulba.num_actor_threads
                self.actor_replay = replay_for_actors(mine, cfg.streams_per_actor, first)
        if self.learning:
            self.pools = seat_pools(
                cfg, ckpt, params, update=updates, resume=resume, cluster=self._cluster
            )
        self._items = ckpt
        self._publish(params)

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
            if self.config.deterministic:  # drawn from the rounds it reached (a resume, too)
                self.pools.reached(other.learned_rounds(), name)

    # ------------------------------------------------------------------ run-time control
    def load_params(self, params: Any) -> None:
        """The learner takes `params` (host arrays) as a warm start would; the actors get them
        with the next publish, now."""
        learner = self.learner
        self.state = learner.core.with_params(self.state, learner.put_state(params))
        self._publish(learner.actor_params(self.state))

    def _publish(self, params: Any) -> None:
        """The actors get `params`, this version's (an on-policy agent's round `updates` is
        acted with them)."""
        self.store.publish(params, self.updates)
        if not self.flow.replays:
            self._reached(self.updates, params)

    def _published_round(self, round_: int) -> int | None:
        """An on-policy agent's round `round_` is acted with its version `round_`: once it is
        published (None at a stop)."""
        return round_ if self.store.wait_version(round_, self.stop_actors) else None

    def _round_begins(self, round_: int, version: int) -> None:
        """A replay agent's round `round_` is acted with its newest params, `version`."""
        assert version == self.updates, (version, self.updates)
        self._reached(round_, self.learner.actor_params(self.state))

    def _reached(self, round_: int, params: Any) -> None:
        """Deterministic mode: this agent's lockstep round `round_` is acted with `params`; the
        other agents' actors may now move with them (`RoundParams`), and draw from the
        snapshots of it (every snapshot of it is in, `OpponentPool.draw`)."""
        if not self.config.deterministic:
            return
        if self.lockstep is not None:
            self.lockstep.rounds.record(round_, params)
        if self.pools:
            self.pools.reached(round_)
        for pools in self.followers:
            pools.reached(round_, self.name)

    def items(self) -> dict[str, bytes]:
        """This process's checkpoint items: the replay's contents and the opponent pools."""
        items = {}
        if self.data is not None and self.flow.saves(self.config, self._obs_shape):
            items["data"] = snapshot_bytes(self.data)
        if self.pools:  # in lockstep mode, the records of the rounds its actors acted
            before = self.next_round() if self.config.deterministic else None
            items["pool"] = self.pools.to_bytes(before)
        if self.lockstep is not None:
            items.update(self.lockstep.items(self.updates))
        return items

    def policy_params(self) -> Any:
        return self.learner.actor_params(self.state)

    def eval_params(self) -> Any:
        """The params store's copy on the first actor device (never donated)."""
        return self.store.get(self._devices.actor_devices[0])[0]

    # ------------------------------------------------------------------ acting
    def start(self, others: dict[str, OtherAgent], env_steps: int) -> None:
        """Starts this lane's actors (none when it does not learn) from its own updates (a
        lockstep actor's next round)."""
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
            version_for=getattr(self.data, "version_for", self._published_round),
        )
        self.fleet = Fleet(
            cfg,
            self.agent.actor,
            self._devices.actor_devices,
            self.store,
            shared,
            start_update=self.updates,
            replay=self.actor_replay,
            start_unroll=self.start_unroll,
            pools=self.pools,
            others=others,
            greedy=self.greedy,
        )
        self.data.check_actors = self.fleet.check

    def other(self) -> OtherAgent:
        """This agent as the others' actors see it."""
        rounds = self.lockstep.rounds if self.lockstep is not None else None
        return OtherAgent(self.agent.actor, self.store, self.greedy, rounds)

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

    def next_round(self) -> int:
        """The lockstep round this agent's actors act next: an on-policy agent's updates, a
        replay's rounds inserted (`data/lockstep_replay.py`)."""
        return getattr(self.data, "rounds", self.updates)

    def learned_rounds(self) -> int:
        """The lockstep rounds this agent's learner is done with: an on-policy agent's updates
        (one round each), a replay's own count (`data/lockstep_replay.py`)."""
        return getattr(self.data, "learned_rounds", self.updates)

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
        # The snapshots first: a lockstep actor draws from them once it has the params.
        if self.pools:  # self-play opponents: a snapshot every pool_every_updates
            self.pools.offer(params, self.updates, round_=self.next_round())
        for pools in self.followers:  # the other agents' leagues of this one
            pools.offer(params, self.updates, self.name, self.next_round())
        self._publish(params)
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
