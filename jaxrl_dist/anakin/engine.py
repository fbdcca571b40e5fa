"""The Anakin engine: acting and learning in one jitted program over a carry (`program.py`).

One step is a chunk of `n` updates of every seed in one call (`Anakin.train(carry, n)`, a traced
`n`: every chunk length shares one compilation). The shell bounds a chunk by its next log,
evaluation, save or the run's end; the engine keeps it under about `CHUNK_S` seconds so
signals, wall-time limits and the control file are seen promptly.

A checkpoint holds the whole carry (learner states, env states, actor states, running episodes,
the data flow's state) plus the first seed's actor params under `params` (what
`scripts/evaluate.py`, `load_policy` and warm starts read), so a resumed run continues
bit-identically.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from jaxrl_dist.anakin.agents import AgentsProgram, LaneProgram
from jaxrl_dist.anakin.envs import (
    anakin_env_problem,
    anakin_eval_env_problem,
    anakin_spec,
    changed_seats_problem,
    greedy_seat_streams,
    make_anakin_env,
)
from jaxrl_dist.anakin.fields import REFUSES, SECTION, USES
from jaxrl_dist.anakin.program import Anakin, Program
from jaxrl_dist.anakin.records import LogWindow, carry_digest, per_seed
from jaxrl_dist.checkpoints.policy import describe_policy
from jaxrl_dist.checkpoints.store import tree_digest
from jaxrl_dist.config import ConfigError
from jaxrl_dist.envs.jax_game_parts import SELF_ROLE, AgentsShared
from jaxrl_dist.envs.jax_league import league_records
from jaxrl_dist.envs.seats import AGENT_ROLE, POOL_ROLE
from jaxrl_dist.evaluation.jax_envs import network_player, run_evaluator
from jaxrl_dist.learning.distributed import Cluster
from jaxrl_dist.run.counters import Counters
from jaxrl_dist.run.engine import Engine, Ready, Saved, Stepped, check_finite
from jaxrl_dist.run.preflight import learner_devices, multi_agent_problem
from jaxrl_dist.run.prepared import Prepared
from jaxrl_dist.threads import RateCap
from jaxrl_dist.types import keys_under, local_replica

CHUNK_S = 1.0  # the longest a chunk of updates runs between two looks at the host's events

_copy = jax.jit(lambda tree: jax.tree.map(jnp.copy, tree))  # new buffers no chunk donates


def _first(tree: Any) -> Any:
    return jax.tree.map(lambda x: x[0], tree)


class AnakinEngine(Engine):
    """`config.anakin.num_seeds` seeds of the agent on JAX envs, vmapped in one jitted program over
    the learner mesh. Every process runs the same program (each holds its devices' envs)."""

    name = "anakin"
    section = SECTION
    uses = USES
    refuses = REFUSES
    donates_on_failure = False  # a non-finite chunk leaves its (non-finite) carry

    @classmethod
    def machine(cls, config: Any) -> tuple[Any, Any]:
        """The JAX env (gymnax, or a pgx board game with seats) and the mesh; ConfigError."""
        problem = anakin_env_problem(config)
        spec = None if problem else anakin_spec(config)
        problem = problem or multi_agent_problem(config, spec)
        problem = problem or anakin_eval_env_problem(config, spec)
        if problem:
            raise ConfigError(problem)
        return spec, learner_devices(config)  # `batch_size` is the envs per seed here

    @classmethod
    def problem(cls, config: Any, flow: Any) -> str | None:
        return flow.device_problem(config)

    def __init__(
        self, config: Any, prepared: Prepared, cluster: Cluster, stop_requested: threading.Event
    ):
        super().__init__(config, prepared, cluster, stop_requested)
        self._lanes = list(prepared.lanes)  # every agent's view, agent, flow and warm start
        programs = [self._program(lane) for lane in self._lanes]
        # One agent's program is the run's; several agents' one program steps them all.
        program = self.layout.alone(programs)
        if program is None:
            pairs = zip(self._lanes, programs, strict=True)
            program = AgentsProgram(
                [LaneProgram(lane.view.name, p, lane.view.learning) for lane, p in pairs]
            )
        self.envs = {lane.view.name: p.env for lane, p in zip(self._lanes, programs, strict=True)}
        self.env = programs[0].env
        self.anakin = Anakin(program, config.anakin.num_seeds, prepared.devices.learner_mesh)
        # Per seed: every learning agent's rollout (one update of the run updates each).
        self._steps = {
            lane.view.name: lane.view.config.batch_size * config.unroll_length
            for lane in self._lanes
            if lane.view.learning
        }
        self.steps_per_update = sum(self._steps.values())
        self.carry: Any = None
        self._seconds_per_update: float | None = None  # known once a chunk ran compiled
        # max_updates_per_s: chunks of at most a second's updates, paced between chunks.
        cap = config.max_updates_per_s
        self._cap = RateCap(cap) if cap else None
        self._windows: dict[str, LogWindow] = {}
        # How to rebuild each agent's acting network (several agents' checkpoints keep them).
        self._policies = {
            lane.view.name: describe_policy(lane.view.config, self.spec) for lane in self._lanes
        }

    def _program(self, lane: Any) -> Program:
        """One agent's `Program`: its env streams (the other agents' seats played by their
        networks, greedily where their exploration mask is off), its data flow, its greedy bit."""
        view = lane.view
        others = {AGENT_ROLE + o.view.name: network_player(o.agent.actor) for o in self._lanes}
        # A greedy agent's snapshots still explore, in its own games and in a league's.
        greedy = {AGENT_ROLE + o.view.name for o in self._lanes if not o.view.exploring}
        if not view.exploring:  # its self-play seats' other side too
            greedy.add(SELF_ROLE)
        env = make_anakin_env(view.config, lane.agent.actor, others, frozenset(greedy))
        return Program(
            lane.agent,
            env,
            num_envs=view.config.batch_size,
            unroll_length=self.config.unroll_length,
            flow=lane.flow.device(view.config),
            greedy=not view.exploring,
            greedy_rows=greedy_seat_streams(view.config.seats, env),
        )

    def _carries(self, carry: Any = None) -> dict[str, Any]:
        """Each agent's carry by name (`Layout.split` of the program's)."""
        return self.layout.split(self.carry if carry is None else carry)

    def _core(self, name: str) -> Any:
        return self.agents[name].learner

    def _first_params(self, name: str, carry: Any) -> Any:
        """Agent `name`'s acting params of the first seed, from its carry."""
        return _first(self._core(name).actor_params(carry.learner))

    def saved_abstract(self) -> dict[str, Any]:
        """The saved tree as a restore target: shapes, dtypes and the run's shardings."""
        replicated = NamedSharding(self.devices.learner_mesh, PartitionSpec())
        abstract = jax.eval_shape(self._saved_tree, self.anakin.abstract)
        carries = self._carries(self.anakin.abstract)

        def placed(tree: dict[str, Any], carry: Any) -> dict[str, Any]:
            params = jax.tree.map(
                lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=replicated),
                tree["params"],
            )
            return {"params": params, "carry": carry}

        trees = self.layout.lanes_of(abstract)
        return self.layout.tree({n: placed(trees[n], c) for n, c in carries.items()})

    def _saved_tree(self, carry: Any) -> dict[str, Any]:
        """`{"params": the first seed's, "carry": ...}` of each agent, as the layout writes them
        (several agents: one per name under "agents", what `checkpoints.store.agent_state`
        reads)."""
        trees = {
            name: {"params": self._first_params(name, c), "carry": c}
            for name, c in self._carries(carry).items()
        }
        return self.layout.tree(trees)

    # ------------------------------------------------------------------ the state
    def begin(self, ckpt: Any, resume: bool) -> dict[str, Any] | None:
        cfg = self.config
        if resume:
            saved, meta = ckpt.restore(self.saved_abstract())
            _refuse(changed_seats_problem(self.config, meta.get("config", {})))
            trees = self.layout.lanes_of(saved)
            self.carry = self.layout.joined({n: tree["carry"] for n, tree in trees.items()})
            return meta
        seeds = jnp.arange(cfg.seed, cfg.seed + cfg.anakin.num_seeds, dtype=jnp.uint32)
        # Warm starts go into the init: the streams' first replies and each league's first
        # snapshot and frozen policy are already the warm params.
        warm = {lane.view.name: lane.warm_params for lane in self._lanes}
        warm = {name: params for name, params in warm.items() if params is not None}
        self.carry = self.anakin.init(seeds, self.layout.params(warm) if warm else None)
        return None

    def _joined(self, carries: dict[str, Any]) -> Any:
        """Each agent's carry back as the program's carry, laid out on the mesh."""
        return jax.device_put(self.layout.joined(carries), self.anakin.sharding)

    def saved(self, step: int) -> Saved:
        counts = {
            lane.view.name: {
                "updates": step if lane.view.learning else 0,
                "env_steps": step * self._steps.get(lane.view.name, 0),
            }
            for lane in self._lanes
        }
        meta = self.layout.meta(counts, policies=self._policies)
        return Saved(self._saved_tree(self.carry), meta)

    def _per_lane(self, get: Any) -> Any:
        """`get(name, carry)` of every agent, as hooks, evaluators and digests take it."""
        return self.layout.params({name: get(name, c) for name, c in self._carries().items()})

    def policy_params(self) -> Any:
        """The first seed's params (several agents: each one's by name)."""
        return self._per_lane(self._first_params)

    def eval_params(self) -> Any:
        """A copy of every seed's params (`[S, ...]` leaves; several agents: by name)."""
        return self._per_lane(lambda n, c: _copy(self._core(n).actor_params(c.learner)))

    def digests(self) -> tuple[str, str]:
        return tree_digest(self.policy_params()), carry_digest(self.carry)

    def hparams(self) -> dict[str, Any]:
        """One seed's (several agents: each one's as `NAME/field`)."""
        return {
            self._prefix(name) + k: v
            for name, c in self._carries().items()
            for k, v in _first(self._core(name).hparams(c.learner)).items()
        }

    def set_hparams(self, hparams: dict[str, Any]) -> None:
        seeds, carries = self.config.anakin.num_seeds, self._carries()
        for name, carry in carries.items():
            prefix = self._prefix(name)
            mine = keys_under(hparams, prefix)
            every = {k: jnp.broadcast_to(jnp.asarray(v), (seeds,)) for k, v in mine.items()}
            learner = self._core(name).with_hparams(carry.learner, every)
            carries[name] = carry._replace(learner=learner)
        self.carry = self._joined(carries)

    def policy_params_of(self, snapshot: Any) -> Any:
        """The first seed's params of an `eval_params` snapshot (several agents: by name)."""
        return jax.tree.map(lambda x: x[0], snapshot)

    def take_params(self, snapshot: Any) -> None:
        """Every seed's learner takes its own params of the snapshot (`[S, ...]` leaves)."""
        carries, per_lane = self._carries(), self.layout.params_of(snapshot)
        for name, carry in carries.items():
            params = per_lane[name]
            learner = jax.vmap(self._core(name).with_params)(carry.learner, params)
            carries[name] = carry._replace(learner=learner)
        self.carry = self._joined(carries)

    def load_params(self, name: str, params: Any) -> None:
        """Every seed's learner of agent `name` takes the same `params` (the league's
        snapshots and a frozen start keep theirs)."""
        carries = self._carries()
        carry, core = carries[name], self._core(name)
        learner = jax.vmap(core.with_params, in_axes=(0, None))(carry.learner, params)
        carries[name] = carry._replace(learner=learner)
        self.carry = self._joined(carries)

    def _prefix(self, name: str) -> str:
        return self.layout.prefix(name)

    # ------------------------------------------------------------------ the run
    def evaluator(self, in_background: bool, workdir: str) -> tuple[Any, Any]:
        cores = {lane.view.name: lane.agent.actor for lane in self._lanes}
        return run_evaluator(self.config, self.envs, cores), None

    def start(self, counters: Counters) -> None:
        self._windows = {
            name: LogWindow(self._lane_steps(name, counters)) for name in self._carries()
        }
        self._first_chunk = counters.updates == 0  # a fresh run's compiles in its first chunk
        if self._cap is not None:
            self._cap.restart(counters.updates)

    def _lane_steps(self, name: str, counters: Counters) -> int:
        """An agent's env steps (one seed's): the run's for one agent."""
        own = counters.updates * self._steps.get(name, 0)
        return self.layout.counters(counters, counters.updates, own).env_steps

    def prepare(self, budget: int, at_update: int) -> Ready:
        """Nothing to read: the chunk's length, at most about CHUNK_S seconds of updates (1
        until the speed is known), or that a stop was asked for."""
        updates = 1
        if self._seconds_per_update is not None:
            updates = max(1, min(budget, int(CHUNK_S / max(self._seconds_per_update, 1e-9))))
        if self._cap is not None:  # the updates of one chunk run at the device's speed
            updates = min(updates, max(1, int(self._cap.rate * CHUNK_S)))
            self._cap.wait(self._stop_requested)
        return Ready(updates=updates, stopped=self._stop_requested.is_set())

    def advance(self, updates: int, at_update: int, ready: int = 1) -> Stepped:
        if self._cap is not None:
            self._cap.take(updates)
        start = time.perf_counter()
        self.carry = self.anakin.train(self.carry, jnp.int32(updates))
        totals = {n: c.totals for n, c in self._carries().items() if n in self._steps}
        totals = jax.device_get(local_replica(totals))
        self.carry = self.anakin.drain(self.carry)
        if not self._first_chunk:  # the first chunk includes the compile
            self._seconds_per_update = (time.perf_counter() - start) / updates
        self._first_chunk = False
        metrics, episodes = {}, 0
        for name, t in totals.items():
            prefix = self._prefix(name)
            metrics.update({prefix + k: float(np.mean(v)) for k, v in t.metrics.items()})
            self._windows[name].add(t)
            episodes += int(t.episodes.sum())
        check_finite(metrics, f"by update {at_update + updates}")
        return Stepped(metrics, env_steps=updates * self.steps_per_update, episodes=episodes)

    def _learner_updates(self, name: str) -> int | None:
        """A replay learner's own update count (the first seed's), None where the flow learns
        once per rollout (`counters.updates`)."""
        steps = getattr(self._carries()[name].learner, "update_step", None)
        flow = next(lane.flow for lane in self._lanes if lane.view.name == name)
        if not flow.replays or steps is None:
            return None
        return int(np.asarray(jax.device_get(local_replica(steps)))[0])

    def log_record(self, metrics: dict[str, float], counters: Counters) -> dict[str, float]:
        record = {}
        for name, window in self._windows.items():
            if name not in self._steps:
                continue
            prefix = self._prefix(name)
            mine = keys_under(metrics, prefix)
            learner_updates = self._learner_updates(name)
            if learner_updates == 0:  # a replay still filling: no update has made metrics yet
                mine = {}
            lane_counters = dataclasses.replace(
                counters, env_steps=self._lane_steps(name, counters)
            )
            lane = window.record(mine, lane_counters)
            if learner_updates is not None:
                lane["charts/learner_updates"] = learner_updates
            record.update({prefix + k: v for k, v in lane.items()})
        if "charts/sps" not in record:  # the run's speed and updates beside each agent's
            record["charts/sps"] = sum(record[f"{n}/charts/sps"] for n in self._steps)
            record["charts/updates"] = counters.updates
        if self._cap is not None:  # every agent's: they update in lockstep
            record.update(self._cap.window(counters.updates))
        return record

    def summary(self, counters: Counters, evals: list[dict[str, Any]]) -> dict[str, Any]:
        """Every seed's totals, each seed's evaluations (`per_seed`), a replay learner's own
        update count, a board game's league; several agents: each one's under `agents`."""
        seeds = self.config.anakin.num_seeds
        wall = max(counters.wall_time_s, 1e-9)
        summary = {
            "num_seeds": seeds,
            "env_steps_all_seeds": counters.env_steps * seeds,
            "sps_all_seeds": round(counters.env_steps * seeds / wall, 1),
        }
        agents = {name: self._agent_summary(name, counters, evals) for name in self._carries()}
        summary.update(self.layout.summary(agents))
        return summary

    def _agent_summary(
        self, name: str, counters: Counters, evals: list[dict[str, Any]]
    ) -> dict[str, Any]:
        seeds, prefix = self.config.anakin.num_seeds, self._prefix(name)
        out: dict[str, Any] = self.layout.own(
            lambda: {
                "learning": name in self._steps,
                "updates": counters.updates if name in self._steps else 0,
                "env_steps": self._lane_steps(name, counters),
                "params_sha256": tree_digest(self._first_params(name, self._carries()[name])),
            }
        )
        out["seeds"] = per_seed(evals, self.config, prefix)
        learner_updates = self._learner_updates(name)
        if learner_updates is not None:
            out["learner_updates"] = learner_updates
        if POOL_ROLE in getattr(self.envs[name], "roles", ()):  # a game's pool: seeds' records
            shared = jax.device_get(local_replica(self._carries()[name].shared))
            league = shared.league if isinstance(shared, AgentsShared) else shared
            out["opponent_pool"] = [
                league_records(jax.tree.map(lambda x, i=i: x[i], league)) for i in range(seeds)
            ]
        if getattr(self.envs[name], "follows_agents", False):  # the other agents' pools
            leagues = jax.device_get(local_replica(self._carries()[name].shared)).leagues
            out["agent_pools"] = {
                other: [league_records(jax.tree.map(lambda x, i=i: x[i], lg)) for i in range(seeds)]
                for other, lg in leagues.items()
                if f"{POOL_ROLE}:{other}" in self.envs[name].roles
            }
        return out


def _refuse(problem: str | None) -> None:
    if problem:
        raise ConfigError(problem)
