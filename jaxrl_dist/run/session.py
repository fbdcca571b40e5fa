"""What one `Trainer.run` call holds while it runs, and how it is built from the checks' output.

`start_session` restores or initialises the learner state and the counters, then builds the
parts around the loop: the params store, the data seam, the acting fleet, evaluation, saving and
logs. The trainer loop (`trainer.py`) only reads batches, updates and publishes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import jax

from jaxrl_dist.acting.actor import ActorShared, ActorStats
from jaxrl_dist.acting.fleet import Fleet
from jaxrl_dist.acting.opponent_pool import SeatPools
from jaxrl_dist.acting.params_store import ParamsStore
from jaxrl_dist.config import ConfigError, TrainConfig, jsonable
from jaxrl_dist.data import data_snapshot, make_data
from jaxrl_dist.envs import derive_seed
from jaxrl_dist.errors import RunError
from jaxrl_dist.learning.distributed import Cluster
from jaxrl_dist.learning.learner import Learner
from jaxrl_dist.learning.mesh import local_replica
from jaxrl_dist.run.checkpoint import Checkpointer, first_line, tree_digest
from jaxrl_dist.run.counters import Counters, EvalHistory
from jaxrl_dist.run.evaluation import make_evaluator
from jaxrl_dist.run.hooks import Hooks
from jaxrl_dist.run.logger import MetricLogger, Progress
from jaxrl_dist.run.monitor import EvalMonitor
from jaxrl_dist.run.policy import describe_policy
from jaxrl_dist.run.preflight import Prepared
from jaxrl_dist.run.resume import (
    ReplayLog,
    replay_for_actors,
    restore_checkpoint,
    restore_replay_contents,
)
from jaxrl_dist.run.saving import Saver
from jaxrl_dist.run.videos import EvalVideos
from jaxrl_dist.run.wandb_sink import make_sink

POOL_SEED_PURPOSE = 5  # derive_seed path of the opponent pools' samplers (per process)


@dataclasses.dataclass
class Session:
    """The parts of a running run (`Trainer.run`)."""

    learner: Learner
    store: ParamsStore
    data: Any  # the data seam: OnPolicyQueue or UniformReplay (`jaxrl_dist.data`)
    fleet: Fleet | None  # None until the actors start
    stats: ActorStats
    stop_actors: threading.Event
    monitor: EvalMonitor | None  # process 0 only
    saver: Saver
    logger: MetricLogger | None  # process 0 only
    progress: Progress
    counters: Counters
    clock: Callable[[], float]  # wall seconds of the whole run, resumed runs included
    state: Any  # the newest learner state; the one before it was donated to the update
    replay: ReplayLog | None  # deterministic mode: env actions since the env epoch began
    initial_digests: tuple[str, str]  # (actor params, whole state)
    resumed_from: int | None
    actor_replay: dict  # lockstep resume: {global actor index: env actions to replay}
    pools: SeatPools | None = None  # the seats' snapshot roles (opponent pool, frozen start)

    def release(self, failed: bool = False) -> None:
        """Closes the evaluator, the checkpointer (after its last save) and the logs; a failed
        run also closes the W&B sink (else the trainer does, after the learning curve)."""
        if self.monitor is not None:
            self.monitor.close()
        self.saver.ckpt.close()
        if self.logger is not None:
            self.logger.close(failed=failed)


def _initial_state(cfg, prepared, learner, ckpt, replay, resume, cluster, history, data):
    """(state, counters, the resumed checkpoint's meta or None, the replay for the actors
    {global actor index: env actions}); a resume also refills `data` if the step saved it."""
    state = learner.init_state()
    if resume:
        columns = cfg.process_batch_size(cluster.count)
        columns = slice(cluster.index * columns, (cluster.index + 1) * columns)
        state, meta, full = restore_checkpoint(ckpt, state, replay, columns)
        if prepared.data != "on_policy":
            restore_replay_contents(ckpt, data, cfg.replay.min_size, cluster.is_primary)
        counters = Counters.from_meta(meta)
        history.resume(counters.updates, meta.get("evals"))
        return state, counters, meta, replay_for_actors(full, cfg.envs_per_actor)
    if prepared.warm_params is not None:
        state = learner.core.with_params(state, learner.put_state(prepared.warm_params))
    return state, Counters(), None, {}


def start_session(
    cfg: TrainConfig,
    prepared: Prepared,
    workdir: str,
    resume: bool,
    quiet: bool,
    hooks: Hooks,
    cluster: Cluster,
    stop_requested: threading.Event,
) -> tuple[Session, dict | None]:
    """Builds the session (actors not started yet); returns it and the resumed checkpoint's
    meta (None on a fresh start). Raises ConfigError or RunError before the actors start.
    `stop_requested` ends the learner's waits for data; the actors' waits end at the stop of
    the actors (`Session.stop_actors`), after the loop."""
    ckpt = Checkpointer(
        os.path.join(workdir, "checkpoints"), cfg.keep_checkpoints, cfg.keep_best_checkpoints
    )
    learner = Learner(prepared.agent.learner, prepared.devices, cfg.seed)
    replay = None
    if cfg.deterministic:
        layout = {"unroll_length": cfg.unroll_length, "envs_per_actor": cfg.envs_per_actor}
        replay = ReplayLog(cfg.env_epoch_updates, {**layout, "batch_size": cfg.batch_size})
    history = EvalHistory(workdir, cluster.is_primary)
    stop_actors = threading.Event()
    data = make_data(prepared.data, cfg, cluster.count, cluster.index, stop_actors, stop_requested)
    try:
        state, counters, meta, actor_replay = _initial_state(
            cfg, prepared, learner, ckpt, replay, resume, cluster, history, data
        )
    except BaseException:
        ckpt.close()
        raise
    if cluster.is_primary:  # the first write to the work dir (besides checkpoints/)
        with open(os.path.join(workdir, "config.json"), "w") as f:
            json.dump(jsonable(cfg.to_dict()), f, indent=2)
    params = learner.actor_params(state)
    initial_digests = tree_digest(params), tree_digest(state)
    pools = _seat_pools(cfg, ckpt, params, counters.updates, resume, cluster)
    differ = cluster.disagreeing(initial_digests[0])
    if differ:  # the same config and seed must give every process the same params
        raise RunError(f"process(es) {differ} start from other params than process 0")
    start, base_wall = time.monotonic(), counters.wall_time_s
    store = ParamsStore(prepared.devices.actor_devices)
    store.publish(params, counters.updates)
    logger = None
    if cluster.is_primary:
        try:
            sink = make_sink(cfg, workdir, resume)
        except BaseException:  # wandb.init failed: release the checkpointer, say why
            ckpt.close()
            raise
        logger = MetricLogger(workdir, wall_time_offset=base_wall, sink=sink)
    progress = Progress(cfg.total_env_steps, quiet=quiet or not cluster.is_primary)
    monitor = None
    if cluster.is_primary:
        evaluator = make_evaluator(
            cfg.env_id, cfg.env_kwargs, cfg.eval_episodes, cfg.seed, prepared.agent.actor,
            prepared.devices.actor_devices[0], prepared.spec.num_players,
            cfg.seats.eval_opponent, prepared.spec.num_agents,
            in_xla=cfg.evaluates_in_background,
        )  # fmt: skip
        videos = None
        if cfg.video_every_evals:
            videos = EvalVideos(cfg, prepared.agent, prepared.spec, workdir)
        monitor = EvalMonitor(cfg, evaluator, hooks, logger, progress, history, videos)
    session = Session(
        learner=learner,
        store=store,
        data=data,
        fleet=None,
        stats=ActorStats(),
        stop_actors=stop_actors,
        monitor=monitor,
        saver=Saver(
            cfg,
            cluster,
            prepared.devices,
            ckpt,
            describe_policy(cfg, prepared.spec),
            wall_time_s=base_wall,
            process_items=_process_items(data, prepared, cfg, pools),
        ),  # fmt: skip
        logger=logger,
        progress=progress,
        counters=counters,
        clock=lambda: base_wall + time.monotonic() - start,
        state=state,
        replay=replay,
        initial_digests=initial_digests,
        resumed_from=counters.updates if resume else None,
        actor_replay=actor_replay,
        pools=pools,
    )
    return session, meta


def _process_items(data, prepared: Prepared, cfg: TrainConfig, pools) -> dict:
    """What each checkpoint saves per process: the replay's contents, the seats' pools."""
    items = {}
    replay = data_snapshot(data, prepared.data, cfg, prepared.spec)
    if replay is not None:
        items["data"] = replay
    if pools:
        items["pool"] = pools.to_bytes
    return items


def _seat_pools(cfg: TrainConfig, ckpt, params, update: int, resume: bool,
                cluster: Cluster) -> SeatPools | None:  # fmt: skip
    """The seats' snapshot pools (None without snapshot roles): a resume takes back this
    process's saved pools; a fresh start (or a step saved without them) starts from `params`."""
    pools = SeatPools(cfg.seats, derive_seed(cfg.seed, POOL_SEED_PURPOSE, cluster.index))
    if not pools:
        return None
    host = jax.device_get(local_replica(params))
    saved = ckpt.restore_data(ckpt.latest_step(), "pool") if resume else None
    if saved is None:
        if resume and cluster.is_primary:
            print(f"warning: checkpoint {ckpt.latest_step()} holds no opponent pool; the pools "
                  "start again from the resumed params", file=sys.stderr)  # fmt: skip
        pools.start(host, update)
        return pools
    try:
        pools.restore_bytes(saved, host)
    except Exception as e:  # noqa: BLE001  a cut file, another network's snapshots
        raise ConfigError(
            f"--resume: the opponent pool saved at checkpoint {ckpt.latest_step()} cannot be "
            f"taken back ({first_line(e)}); resume with the run's own config and network"
        ) from None
    return pools


def start_acting(session: Session, cfg: TrainConfig, prepared: Prepared) -> None:
    """Starts this process's actors (and inference servers)."""
    shared = ActorShared(
        session.data.write, session.stop_actors, session.stats, cfg.unroll_length,
        cfg.rollout_segments(jax.process_count()), sync=cfg.sync_collection,
    )  # fmt: skip
    session.fleet = Fleet(
        cfg, prepared.agent.actor, prepared.devices.actor_devices, session.store, shared,
        start_update=session.counters.updates, replay=session.actor_replay, pools=session.pools,
    )  # fmt: skip
    session.data.check_actors = session.fleet.check
