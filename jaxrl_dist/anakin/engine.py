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

import threading
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from jaxrl_dist.anakin.envs import (
    anakin_env_problem,
    anakin_eval_env_problem,
    anakin_spec,
    make_anakin_env,
    make_eval_env,
)
from jaxrl_dist.anakin.evaluation import JaxEvaluator
from jaxrl_dist.anakin.fields import REFUSES, USES
from jaxrl_dist.anakin.program import Anakin, Program
from jaxrl_dist.anakin.records import LogWindow, carry_digest, per_seed
from jaxrl_dist.config import ConfigError, jsonable
from jaxrl_dist.envs.jax_league import league_records
from jaxrl_dist.envs.seats import POOL_ROLE
from jaxrl_dist.learning.distributed import Cluster
from jaxrl_dist.learning.mesh import local_replica
from jaxrl_dist.run.checkpoint import tree_digest
from jaxrl_dist.run.counters import Counters
from jaxrl_dist.run.engine import Engine, Ready, Saved, Stepped, check_finite
from jaxrl_dist.run.preflight import Prepared, learner_devices, multi_agent_problem

CHUNK_S = 1.0  # the longest a chunk of updates runs between two looks at the host's events

_copy = jax.jit(lambda tree: jax.tree.map(jnp.copy, tree))  # new buffers no chunk donates


def _first(tree: Any) -> Any:
    return jax.tree.map(lambda x: x[0], tree)


class AnakinEngine(Engine):
    """`config.num_seeds` seeds of the agent on JAX envs, vmapped in one jitted program over
    the learner mesh. Every process runs the same program (each holds its devices' envs)."""

    name = "anakin"
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
        super().__init__(config, prepared, cluster)
        self.env = make_anakin_env(config, self.agent.actor)
        program = Program(
            self.agent,
            self.env,
            num_envs=config.batch_size,
            unroll_length=config.unroll_length,
            flow=prepared.flow.device(config),
        )
        self.anakin = Anakin(program, config.num_seeds, prepared.devices.learner_mesh)
        self.steps_per_update = config.batch_size * config.unroll_length  # per seed
        self._stop_requested = stop_requested
        self.carry: Any = None
        self._seconds_per_update: float | None = None  # known once a chunk ran compiled
        self._window: LogWindow | None = None

    def saved_abstract(self) -> dict[str, Any]:
        """The saved tree as a restore target: shapes, dtypes and the run's shardings."""
        replicated = NamedSharding(self.devices.learner_mesh, PartitionSpec())
        params = jax.eval_shape(self._saved_tree, self.anakin.abstract)["params"]
        params = jax.tree.map(
            lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=replicated), params
        )
        return {"params": params, "carry": self.anakin.abstract}

    def _saved_tree(self, carry: Any) -> dict[str, Any]:
        return {"params": _first(self.agent.learner.actor_params(carry.learner)), "carry": carry}

    # ------------------------------------------------------------------ the state
    def begin(self, ckpt: Any, resume: bool) -> dict[str, Any] | None:
        cfg = self.config
        if resume:
            saved, meta = ckpt.restore(self.saved_abstract())
            self._check_same_seats(meta)
            self.carry = saved["carry"]
            return meta
        seeds = jnp.arange(cfg.seed, cfg.seed + cfg.num_seeds, dtype=jnp.uint32)
        carry = self.anakin.init(seeds)
        warm = self._warm_params
        if warm is not None:
            with_params = jax.vmap(self.agent.learner.with_params, in_axes=(0, None))
            carry = self.anakin.with_learner(
                carry, lambda learner: with_params(learner, warm), restart_shared=True
            )
        self.carry = carry
        return None

    def _check_same_seats(self, meta: dict[str, Any]) -> None:
        """A board game's env states hold each stream's roles: a resume with other seats
        would play the saved ones (or misread them), so it is refused."""
        saved = meta.get("config", {}).get("seats")
        if self.config.seats.enabled and saved not in (None, jsonable(self.config.seats)):
            raise ConfigError(
                "config.seats differs from the resumed run's (its games hold their roles); "
                "resume with the run's own seats, or start a new --workdir"
            )

    def saved(self, step: int) -> Saved:
        return Saved(self._saved_tree(self.carry))

    def policy_params(self) -> Any:
        """The first seed's params."""
        return self._saved_tree(self.carry)["params"]

    def eval_params(self) -> Any:
        """A copy of every seed's params (`[S, ...]` leaves)."""
        return _copy(self.agent.learner.actor_params(self.carry.learner))

    def digests(self) -> tuple[str, str]:
        return tree_digest(self.policy_params()), carry_digest(self.carry)

    def hparams(self) -> dict[str, Any]:
        return _first(self.agent.learner.hparams(self.carry.learner))

    def set_hparams(self, hparams: dict[str, Any]) -> None:
        seeds, core = self.config.num_seeds, self.agent.learner
        every = {k: jnp.broadcast_to(jnp.asarray(v), (seeds,)) for k, v in hparams.items()}
        self.carry = self.anakin.with_learner(self.carry, lambda s: core.with_hparams(s, every))

    # ------------------------------------------------------------------ the run
    def evaluator(self, in_background: bool, workdir: str) -> tuple[Any, Any]:
        cfg = self.config
        env = make_eval_env(cfg, self.env).evaluation(cfg.eval_episodes, cfg.seats.eval_opponent)
        return JaxEvaluator(env, self.agent.actor, cfg.eval_episodes, cfg.seed), None

    def start(self, counters: Counters) -> None:
        self._window = LogWindow(counters.env_steps)
        self._first_chunk = counters.updates == 0  # a fresh run's compiles in its first chunk

    def prepare(self, budget: int, at_update: int) -> Ready:
        """Nothing to read: the chunk's length, at most about CHUNK_S seconds of updates (1
        until the speed is known), or that a stop was asked for."""
        updates = 1
        if self._seconds_per_update is not None:
            updates = max(1, min(budget, int(CHUNK_S / max(self._seconds_per_update, 1e-9))))
        return Ready(updates=updates, stopped=self._stop_requested.is_set())

    def advance(self, updates: int, at_update: int, ready: int = 1) -> Stepped:
        start = time.perf_counter()
        self.carry = self.anakin.train(self.carry, jnp.int32(updates))
        totals = jax.device_get(local_replica(self.carry.totals))
        self.carry = self.anakin.drain(self.carry)
        if not self._first_chunk:  # the first chunk includes the compile
            self._seconds_per_update = (time.perf_counter() - start) / updates
        self._first_chunk = False
        metrics = {k: float(np.mean(v)) for k, v in totals.metrics.items()}
        check_finite(metrics, f"by update {at_update + updates}")
        self._window.add(totals)
        episodes = int(totals.episodes.sum())
        return Stepped(metrics, env_steps=updates * self.steps_per_update, episodes=episodes)

    def _learner_updates(self) -> int | None:
        """A replay learner's own update count (the first seed's), None where the flow learns
        once per rollout (`counters.updates`)."""
        steps = getattr(self.carry.learner, "update_step", None)
        if not self._flow.replays or steps is None:
            return None
        return int(np.asarray(jax.device_get(local_replica(steps)))[0])

    def log_record(self, metrics: dict[str, float], counters: Counters) -> dict[str, float]:
        learner_updates = self._learner_updates()
        if learner_updates == 0:  # a replay still filling: no update has made metrics yet
            metrics = {}
        record = self._window.record(metrics, counters)
        if learner_updates is not None:
            record["charts/learner_updates"] = learner_updates
        return record

    def summary(self, counters: Counters, evals: list[dict[str, Any]]) -> dict[str, Any]:
        """Every seed's totals, each seed's evaluations (`per_seed`), a replay learner's own
        update count, a board game's league."""
        seeds = self.config.num_seeds
        wall = max(counters.wall_time_s, 1e-9)
        summary = {
            "num_seeds": seeds,
            "env_steps_all_seeds": counters.env_steps * seeds,
            "sps_all_seeds": round(counters.env_steps * seeds / wall, 1),
            "seeds": per_seed(evals, self.config),
        }
        learner_updates = self._learner_updates()
        if learner_updates is not None:
            summary["learner_updates"] = learner_updates
        if POOL_ROLE in getattr(self.env, "roles", ()):  # a board game's pool: seeds' records
            shared = jax.device_get(local_replica(self.carry.shared))
            summary["opponent_pool"] = [
                league_records(jax.tree.map(lambda x, i=i: x[i], shared)) for i in range(seeds)
            ]
        return summary
