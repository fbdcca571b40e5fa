"""The Sebulba engine: EnvPool actor threads feed the data seam, the learner updates on the mesh
and publishes params back to the actors (DeepMind's Podracer paper, "Sebulba").

One step is one update. `prepare` reads this process's batch from the data seam (the only
wait); after every process agreed to go on, `advance` learns from it and publishes the new
params (and offers them to the seats' opponent pools). Only the main thread updates and saves.
"""

from __future__ import annotations

import functools
import threading
import time
from typing import Any

import jax

from jaxrl_dist.checkpoints.policy import describe_policy
from jaxrl_dist.checkpoints.store import tree_digest
from jaxrl_dist.config import ConfigError
from jaxrl_dist.envs import check_env, env_spec, xla_loop_problem
from jaxrl_dist.envs.envpool_env import xla_device_problem
from jaxrl_dist.envs.sources import is_python_env, worker_layout_problem
from jaxrl_dist.errors import RunError
from jaxrl_dist.evaluation.agents import agents_evaluator
from jaxrl_dist.evaluation.base import eval_setup
from jaxrl_dist.evaluation.pools import make_evaluator
from jaxrl_dist.evaluation.video import EvalVideos, video_problem
from jaxrl_dist.learning.distributed import Cluster
from jaxrl_dist.run.counters import Counters
from jaxrl_dist.run.engine import Engine, Ready, Saved, Stepped
from jaxrl_dist.run.preflight import (
    eval_env_problem,
    learner_devices,
    multi_agent_problem,
)
from jaxrl_dist.run.prepared import Prepared
from jaxrl_dist.sebulba.fields import REFUSES, SECTION, USES, lockstep_problem
from jaxrl_dist.sebulba.lane import Lane
from jaxrl_dist.sebulba.lane_reads import LaneReads
from jaxrl_dist.sebulba.lane_replay import saved_replay
from jaxrl_dist.sebulba.resume import (
    process_columns,
    put_replay,
    replay_for_actors,
    restore_checkpoint,
)
from jaxrl_dist.sebulba.rotation import Rotation
from jaxrl_dist.threads import RateCap
from jaxrl_dist.types import keys_under

ACTOR_JOIN_TIMEOUT_S = 10.0  # at a stop, for all actors together


class SebulbaEngine(Engine):
    """Actors, the data seam, the learner and the params store of this process."""

    name = "sebulba"
    section = SECTION
    uses = USES
    refuses = REFUSES
    evaluates_beside_by_default = True  # a Python evaluator beside the learner thread

    @classmethod
    def machine(cls, config: Any) -> tuple[Any, Any]:
        """EnvPool's registry, the process count, the XLA loop, the devices, the seats or
        agents, GIFs (the env must render here); ConfigError."""
        check = functools.partial(check_env, start_timeout_s=config.sebulba.env_start_timeout_s)
        # What lockstep actors cannot do, before the batch size deterministic mode asks for.
        problem = lockstep_problem(config) or check(config.env_id, config.env_kwargs)
        problem = problem or config.process_problem(jax.process_count())
        if not problem and config.sebulba.actor_loop == "xla":
            problem = xla_loop_problem(config.env_id, config.env_kwargs)
        if not problem and is_python_env(config.env_id):
            problem = worker_layout_problem(
                config.sebulba.envs_per_actor,
                config.env_batch_size,
                config.sebulba.env_threads_per_actor,
            )
        if (
            not problem
            and is_python_env(config.env_id)
            and config.sebulba.env_thread_affinity_offset >= 0
        ):
            problem = (
                "config.sebulba.env_thread_affinity_offset="
                f"{config.sebulba.env_thread_affinity_offset} pins "
                f"EnvPool's threads; {config.env_id} runs in worker processes: set it to -1"
            )
        if problem:
            raise ConfigError(problem)
        devices = learner_devices(config)
        if config.sebulba.actor_loop == "xla":
            problem = xla_device_problem(d.platform for d in devices.actor_devices)
            if problem:
                raise ConfigError(problem)
        spec = env_spec(config.env_id, config.env_kwargs)
        problem = multi_agent_problem(config, spec) or video_problem(config)
        problem = problem or eval_env_problem(config, spec, check, env_spec)
        if problem:
            raise ConfigError(problem)
        return spec, devices

    @classmethod
    def problem(cls, config: Any, flow: Any) -> str | None:
        """The data flow's host checks; the inference server's batch holds at least one
        actor's recv() (what lockstep actors cannot do is `machine`'s, checked before)."""
        problem = flow.host_problem(config)
        batch = config.sebulba.inference.batch_size
        if (
            not problem
            and config.sebulba.inference.client == "server"
            and 0 < batch < config.env_batch_size
        ):
            problem = (
                f"config.sebulba.inference.batch_size={batch} is smaller than one actor's recv() "
                "batch "
                f"({config.env_batch_size} envs); make it at least that"
            )
        return problem

    def __init__(
        self, config: Any, prepared: Prepared, cluster: Cluster, stop_requested: threading.Event
    ):
        """`stop_requested` ends the learner's waits for data; the actors' waits end when the
        engine `stop`s."""
        super().__init__(config, prepared, cluster, stop_requested)
        self.lanes = [
            Lane(lane, prepared.devices, cluster, stop_requested, self.spec.obs_shape, self.layout)
            for lane in prepared.lanes
        ]
        # How to rebuild each agent's acting network (several agents' checkpoints keep them).
        self._policies = {lane.name: describe_policy(lane.config, self.spec) for lane in self.lanes}
        self._rotation = Rotation(len(self.lanes))
        cap = config.max_updates_per_s  # each agent's learner its own
        self._caps = {lane.name: RateCap(cap) for lane in self.lanes if lane.learning and cap}
        self._reads = LaneReads(self.lanes, self._caps, stop_requested)
        self._last_metrics: dict[str, dict[str, float]] = {}
        self._clock = (time.monotonic(), 0)  # the run's (time, env steps) at the last log

    def saved_abstract(self) -> Any:
        shapes = {
            lane.name: jax.eval_shape(lane.agent.learner.init, jax.random.PRNGKey(0))
            for lane in self.lanes
        }
        return self.layout.tree(shapes)

    # ------------------------------------------------------------------ the state
    def begin(self, ckpt: Any, resume: bool) -> dict[str, Any] | None:
        cluster = self._cluster
        states = {lane.name: lane.learner.init_state() for lane in self.lanes}
        meta, updates = None, dict.fromkeys(states, 0)
        if resume:
            # Deterministic mode's replayed env actions: one agent's are the checkpoint's
            # replay item; several agents' their own items (`Lane.begin`).
            lane = self.layout.alone(self.lanes)
            replay_log = lane.replay_log if lane is not None else None
            columns = process_columns(lane.config, cluster) if replay_log else slice(0)
            template = self.layout.tree(states)
            state, meta, full = restore_checkpoint(ckpt, template, replay_log, columns)
            if lane is not None:
                lane.actor_replay = replay_for_actors(full, lane.config.streams_per_actor)
            states = self.layout.lanes_of(state)
            run = Counters.from_meta(meta)
            counts = self.layout.lane_counts(meta, run.updates, run.env_steps)
            updates = {name: c["updates"] for name, c in counts.items()}
            for lane in self.lanes:
                lane.env_steps = counts[lane.name]["env_steps"]
            self._rotation.last = meta.get("lane_served_last", self._rotation.last)
        for lane in self.lanes:
            items = self.layout.lane_items(ckpt, lane.name)
            lane.begin(items, states[lane.name], updates[lane.name], resume)
            saved = (meta or {}).get("replay_settings", {}).get(lane.name)
            if saved:  # changed at run time before the checkpoint
                lane.resume_replay(saved, saved_replay(meta["config"], lane.name), cluster.count)
        by_name = {lane.name: lane for lane in self.lanes}
        for lane in self.lanes:  # a league across agents: their snapshots, once all began
            lane.follow(by_name, resume)
        return meta

    def saved(self, step: int) -> Saved:
        meta, replay = {}, None
        lane = self.layout.alone(self.lanes)  # several agents save their own (`Lane.items`)
        replay_log = lane.replay_log if lane is not None else None
        window = replay_log.window(step) if replay_log is not None else None
        if window is not None:
            meta["replay"] = replay_log.meta(step)
            columns, rows = (self.devices.batch_sharding(axis=a) for a in (2, 0))
            replay = put_replay(window, replay_log.memory, columns, rows)
        settings = {lane.name: lane.replay_settings() for lane in self.lanes}
        meta["replay_settings"] = {name: s for name, s in settings.items() if s}
        counts = {
            lane.name: {"updates": lane.updates, "env_steps": lane.env_steps} for lane in self.lanes
        }
        meta.update(
            self.layout.meta(counts, lane_served_last=self._rotation.last, policies=self._policies)
        )
        items = self.layout.items({lane.name: lane.items() for lane in self.lanes})
        state = self.layout.tree({lane.name: lane.state for lane in self.lanes})
        return Saved(state, meta, replay, items)

    def _per_lane(self, get: Any) -> Any:
        """`get(lane)` of every lane, as hooks, evaluators and digests take it (`Layout.params`)."""
        return self.layout.params({lane.name: get(lane) for lane in self.lanes})

    def policy_params(self) -> Any:
        return self._per_lane(Lane.policy_params)

    def eval_params(self) -> Any:
        """The params stores' copies on the first actor device (never donated)."""
        return self._per_lane(Lane.eval_params)

    def digests(self) -> tuple[str, str]:
        return tree_digest(self.policy_params()), tree_digest(self._per_lane(lambda x: x.state))

    def hparams(self) -> dict[str, Any]:
        """The hyperparameters in force (several agents: each one's as `NAME/field`)."""
        return {
            lane.prefix + k: v
            for lane in self.lanes
            for k, v in lane.learner.core.hparams(lane.state).items()
        }

    def set_hparams(self, hparams: dict[str, Any]) -> None:
        for lane in self.lanes:
            mine = keys_under(hparams, lane.prefix)
            learner = lane.learner
            lane.state = learner.core.with_hparams(lane.state, learner.put_state(mine))

    # ------------------------------------------------------------------ run-time control
    def _lane_named(self, name: str) -> Lane:
        return next(lane for lane in self.lanes if lane.name == name)

    def load_params(self, name: str, params: Any) -> None:
        lane = self._lane_named(name)
        lane.load_params(params)

    def replay_problem(self, name: str, settings: dict[str, float]) -> str | None:
        return self._lane_named(name).replay_problem(settings, self._cluster.count)

    def set_replay(self, name: str, settings: dict[str, float]) -> None:
        self._lane_named(name).set_replay(settings, self._cluster.count)

    # ------------------------------------------------------------------ the run
    def evaluator(self, in_background: bool, workdir: str) -> tuple[Any, Any]:
        cfg = self.config
        device = self.devices.actor_devices[0]
        lane = self.layout.alone(self.lanes)
        if lane is None:  # several agents: each against the opponent and each other, or slots
            return agents_evaluator(cfg, self.lanes, device, self.spec.num_players), None
        evaluator = make_evaluator(
            eval_setup(cfg, lane.agent.actor, device),
            num_players=self.spec.num_players,
            opponent=cfg.seats.eval_opponent,
            num_agents=self.spec.num_agents,
            in_xla=in_background,
        )
        videos = (
            EvalVideos(cfg, lane.agent, self.spec, workdir)
            if cfg.sebulba.video_every_evals
            else None
        )
        return evaluator, videos

    def start(self, counters: Counters) -> None:
        for lane in self.lanes:
            others = {o.name: o.other() for o in self.lanes if o is not lane}
            lane.start(others, lane.env_steps)
        self._clock = (time.monotonic(), counters.env_steps)
        for lane in self.lanes:
            lane.last_ready = time.monotonic()
            if lane.name in self._caps:
                self._caps[lane.name].restart(lane.updates)
        self._reads.refused = 0

    def prepare(self, budget: int, at_update: int) -> Ready:
        """This process's part of the next update: the lanes whose batch is ready (a one-agent
        run waits for its batch; several agents poll theirs without waiting, `rotation.py`), and
        what the actors counted since the last agreement. Not ready at a stop."""
        failure, stopped, mask, steps, dropped = None, False, 0, 0, 0
        try:
            lane = self.layout.alone(self.lanes)
            if lane is not None:  # one agent waits on its data seam; several are polled
                batch = lane.read(wait=True)
                stopped, mask = batch is None, int(batch is not None)
                fresh = [batch] if batch is not None else []
                cap = self._caps.get(lane.name)
                if not stopped and cap is not None and not cap.wait(self._stop_requested):
                    stopped, mask = True, 0
            elif self.config.deterministic:
                stopped, mask, fresh = self._reads.take_turn()
            else:
                stopped, mask, fresh = self._reads.poll()
        except RunError as e:
            failure, fresh = e, []
        for batch in fresh:
            steps, dropped = steps + batch.env_steps, dropped + batch.dropped
        restarts = episodes = 0
        # In lockstep only the stepped lane's actors are counted: they wait for its next params
        # (another lane's may be halfway through a round).
        counted = [lane for i, lane in enumerate(self.lanes) if mask >> i & 1]
        for lane in self.lanes if not self.config.deterministic else counted:
            r, e = lane.counts()
            restarts, episodes = restarts + r, episodes + e
        ready = Ready(restarts=restarts, episodes=episodes, env_steps=steps, dropped=dropped)
        if failure is not None or stopped:
            return ready._replace(stopped=True, failure=failure, ready=0)
        return ready._replace(ready=mask)

    def advance(self, updates: int, at_update: int, ready: int = 1) -> Stepped:
        self._reads.refused = 0
        lane = self.lanes[self._rotation.pick(ready)]
        if lane.name in self._caps:
            self._caps[lane.name].take()
        metrics = lane.advance()
        self._last_metrics[lane.name] = metrics
        return Stepped(self.layout.keyed(lane.name, metrics))

    def log_record(self, metrics: dict[str, float], counters: Counters) -> dict[str, float]:
        """Every process's window (a gather per lane) as one record: each lane's (its last
        update's metrics, its keys as the layout writes them), and the run's speed and updates
        where the lanes' records do not already say them (one agent's does: it is the run)."""
        record = {}
        for lane in self.lanes:
            rows = self._cluster.gather(lane.window_totals())
            record.update(lane.record(self._last_metrics.get(lane.name, {}), counters, rows))
            record.update(self._cap_window(lane))
        now, (then, steps) = time.monotonic(), self._clock
        record.setdefault("charts/sps", (counters.env_steps - steps) / max(1e-9, now - then))
        record.setdefault("charts/updates", counters.updates)
        self._clock = (now, counters.env_steps)
        return record

    def _cap_window(self, lane: Lane) -> dict[str, float]:
        """A capped learner's updates a second and seconds waited since the last log."""
        cap = self._caps.get(lane.name)
        if cap is None:
            return {}
        return {lane.prefix + k: v for k, v in cap.window(lane.updates).items()}

    def summary(self, counters: Counters, evals: list[dict[str, Any]]) -> dict[str, Any]:
        """Each agent's own counters and params digest (one agent's are the run's)."""
        return self.layout.summary(
            {
                lane.name: self.layout.own(
                    lambda lane=lane: {
                        "learning": lane.learning,
                        "updates": lane.updates,
                        "env_steps": lane.env_steps,
                        # The published copy: a failed update donated the state's buffers.
                        "params_sha256": tree_digest(lane.eval_params()),
                    }
                )
                for lane in self.lanes
            }
        )

    def stop(self) -> None:
        for lane in self.lanes:
            lane.stop_actors.set()
        for lane in self.lanes:
            lane.stop(timeout_s=ACTOR_JOIN_TIMEOUT_S)
