"""What a Sebulba resume takes back besides the learner state: the replay's contents, the seats'
opponent pools, and the replay log that lets deterministic mode resume exactly.

Deterministic mode's actors start new envs at every multiple of `env_epoch_updates` (see
`acting/lockstep.py`), so the env state at update `u` follows from the epoch's seed and the
env actions sent since the epoch began. The learner sees every one of those actions (each update
takes one unroll of every actor), keeps them in a `ReplayLog`, and each checkpoint saves them;
a resumed actor replays them, without inference, before it acts again. Among several agents
each agent's are its own checkpoint item (`LaneReplayLog`), and so are its params of the epoch's
rounds, with which it moved in the others' games (`acting/params_store.py: RoundParams`).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import jax
import numpy as np

from jaxrl_dist.acting.seat_pools import SeatPools
from jaxrl_dist.checkpoints.store import Checkpointer, abstract_like, first_line
from jaxrl_dist.config import ConfigError
from jaxrl_dist.data import snapshot
from jaxrl_dist.data.snapshot import tree_arrays, tree_from_arrays
from jaxrl_dist.envs import derive_seed
from jaxrl_dist.learning.distributed import Cluster
from jaxrl_dist.types import local_replica

log = logging.getLogger(__name__)

POOL_SEED_PURPOSE = 5  # derive_seed path of the opponent pools' samplers (per process)


def restore_checkpoint(
    ckpt: Checkpointer, template: Any, replay: ReplayLog | None, process_columns: slice
) -> tuple[Any, dict, dict | None]:
    """The latest step's (state, with `template`'s shardings; meta; the whole replay,
    `{"env_actions": [n, T, B, ...], "memory": [B, ...]}`, its `process_columns` loaded into
    `replay`). Raises ConfigError when the arrays cannot be read (`check_resumable` found
    their metadata in order)."""
    step = ckpt.latest_step()
    try:
        state, meta = ckpt.restore(abstract_like(template), step)
        full = replay.restore(ckpt, step, meta, process_columns) if replay is not None else None
    except Exception as e:  # noqa: BLE001  Orbax and tensorstore raise many kinds here
        raise ConfigError(
            f"--resume: checkpoint {step} in {ckpt.directory} cannot be restored "
            f"({first_line(e)}); delete that step's directory to resume from an earlier one"
        ) from None
    return state, meta, full


def restore_replay_contents(ckpt: Checkpointer, data: Any, min_size: int, primary: bool) -> None:
    """Refills this process's replay from the latest step's saved contents; when the step
    holds none (`config.replay.save` off), says in one warning line that the replay refills
    to `min_size` before learning goes on. ConfigError if they cannot be taken back."""
    step = ckpt.latest_step()
    try:
        saved = ckpt.restore_data(step)
        if saved is not None:
            data.restore(snapshot.from_bytes(saved))
    except Exception as e:  # noqa: BLE001  Orbax, a cut file, another replay's shapes
        raise ConfigError(
            f"--resume: the replay saved at checkpoint {step} cannot be taken back "
            f"({first_line(e)}); resume with the run's own config, or delete that step's "
            "data/ directory to refill the replay instead"
        ) from None
    if saved is None and primary:
        print(
            f"warning: checkpoint {step} holds no replay contents (config.replay.save is off); "
            f"the replay refills to config.replay.min_size={min_size} before learning goes on",
            file=sys.stderr,
        )


class ReplayLog:
    """This process's env actions since the current env epoch began, one `[T, B_process, ...]`
    array per update (columns: its actors in order, each actor's envs by env id)."""

    def __init__(self, epoch_updates: int, layout: dict[str, int]):
        """`layout`: what the recorded arrays' shapes follow from (unroll length, envs per
        actor, ...); a checkpoint with another layout is not replayed."""
        self._epoch = epoch_updates
        self._layout = layout
        self._start = 0  # the update the kept unrolls start at
        self._unrolls: list[np.ndarray] = []
        self.memory: Any = {}  # the recurrent states after the last unrolls recorded

    def _epoch_start(self, update: int) -> int:
        return update - update % self._epoch

    def record(self, update: int, env_actions: np.ndarray, memory: Any = None) -> None:
        """Adds the env actions of the unrolls update `update` (0-based) learned from, and
        keeps the recurrent states they ended with (`[B_process, ...]`, `{}`: memoryless)."""
        if update % self._epoch == 0 or update != self._start + len(self._unrolls):
            self._start, self._unrolls = update, []  # a new epoch (or a gap: see `window`)
        self._unrolls.append(env_actions)
        self.memory = {} if memory is None else memory

    def window(self, updates: int) -> np.ndarray | None:
        """`[n, T, B_process, ...]`: what a run resumed after `updates` updates replays (the
        unrolls of its epoch before it). None when it starts a new epoch, or when the log lacks
        part of the epoch (after a resume that could not replay): that resume is not exact."""
        first = self._epoch_start(updates)
        if updates == first or self._start != first or len(self._unrolls) != updates - first:
            return None
        return np.stack(self._unrolls)

    def meta(self, updates: int) -> dict[str, int]:
        """What a checkpoint with a replay window after `updates` updates records of it."""
        first = self._epoch_start(updates)
        return {"epoch_updates": self._epoch, "first_update": first, **self._layout}

    def _take_back(self, updates: int, unrolls: np.ndarray, memory: Any) -> None:
        """The log as a checkpoint after `updates` updates kept it: this process's unrolls of
        the epoch (`[n, T, B_process, ...]`) and the recurrent states after them."""
        self._start, self._unrolls, self.memory = self._epoch_start(updates), list(unrolls), memory

    def restore(self, ckpt: Checkpointer, step: int, meta: dict, process_columns: slice) -> Any:
        """Loads the unrolls of checkpoint `step` (saved after `step` updates): this process's
        columns into the log; returns the whole replay item (`env_actions` `[n, T, B, ...]`,
        `memory` `[B, ...]` where a recurrent policy saved it; None if nothing to replay). An
        unusable replay (another `env_epoch_updates`, a checkpoint saved outside deterministic
        mode) is logged: the resume then continues, but not exactly."""
        saved = meta.get("replay")
        first = self._epoch_start(step)
        if first == step:
            return None
        if saved != self.meta(step):
            log.warning(
                "deterministic resume is not exact: checkpoint %d holds no replay for this "
                "config (saved: %s, wanted: %s); the actors start new envs",
                step,
                saved,
                self.meta(step),
            )
            return None
        saved_item = ckpt.restore_replay(step)
        full = np.asarray(saved_item["env_actions"])
        memory = saved_item.get("memory", {})
        columns = jax.tree.map(lambda m: np.asarray(m)[process_columns], memory)
        self._take_back(step, full[:, :, process_columns], columns)
        return {"env_actions": full, "memory": memory}


class LaneReplayLog(ReplayLog):
    """A `ReplayLog` saved as one agent's own checkpoint item among several (`arrays`,
    `from_arrays`: this process's columns, with the layout they follow), where a one-agent
    run's is the checkpoint's replay item (`restore`)."""

    def arrays(self, updates: int) -> dict[str, np.ndarray]:
        """What a checkpoint after `updates` updates keeps ({} at an epoch's start)."""
        window = self.window(updates)
        if window is None:
            return {}
        meta = {f"{LAYOUT}{k}": np.asarray(v, np.int64) for k, v in self.meta(updates).items()}
        return {ENV_ACTIONS: window, **meta, **tree_arrays(self.memory, MEMORY)}

    def from_arrays(self, arrays: dict[str, np.ndarray], updates: int) -> dict | None:
        """Takes back `arrays(updates)`: this process's `{"env_actions": [n, T, B_process,
        ...], "memory": [B_process, ...]}` to replay, or None (nothing saved, or saved for
        another layout: logged, and the resume goes on, not exactly)."""
        if ENV_ACTIONS not in arrays:
            return None
        saved = {k[len(LAYOUT) :]: int(v) for k, v in arrays.items() if k.startswith(LAYOUT)}
        if saved != self.meta(updates):
            log.warning(
                "deterministic resume is not exact: the saved env actions (%s) are not this "
                "config's (%s); the actors start new envs",
                saved,
                self.meta(updates),
            )
            return None
        self._take_back(updates, arrays[ENV_ACTIONS], tree_from_arrays(arrays, MEMORY))
        return {"env_actions": arrays[ENV_ACTIONS], "memory": self.memory}


ENV_ACTIONS, MEMORY, LAYOUT = "env_actions", "memory/", "layout/"


def process_columns(config: Any, cluster: Cluster) -> slice:
    """This process's columns of a replay item's `[n, T, B, ...]` env actions."""
    n = config.process_batch_size(cluster.count)
    return slice(cluster.index * n, (cluster.index + 1) * n)


def replay_for_actors(
    full: dict | None, streams_per_actor: int, first: int = 0
) -> dict[int, tuple]:
    """Splits the replay item's columns by global actor index (`streams_per_actor` each: its
    envs, or with `agents_per_env` its envs' agents; the first block is actor `first`: 0 for
    the whole run's columns, a process's first actor for its own): `{actor: (env actions
    [n, T, n_a, ...], recurrent states [n_a, ...] or None)}`."""
    if full is None:
        return {}
    actions, memory, n = full["env_actions"], full.get("memory"), streams_per_actor
    out = {}
    for g in range(actions.shape[2] // n):
        mine = jax.tree.map(lambda m, g=g: np.asarray(m)[g * n : (g + 1) * n], memory)
        out[first + g] = (actions[:, :, g * n : (g + 1) * n], mine)
    return out


def put_replay(
    window: np.ndarray, memory: Any, sharding: jax.sharding.Sharding, rows: jax.sharding.Sharding
) -> dict[str, Any]:
    """This process's `[n, T, B_process, ...]` window (columns split over the learner devices
    of all processes) and recurrent states `[B_process, ...]` (rows split alike, with the
    `rows` sharding; none for a memoryless policy) as slices of global arrays, for Orbax."""
    item = {"env_actions": jax.make_array_from_process_local_data(sharding, window)}
    if jax.tree.leaves(memory):
        put = lambda m: jax.make_array_from_process_local_data(rows, np.asarray(m))  # noqa: E731
        item["memory"] = jax.tree.map(put, memory)
    return item


def seat_pools(
    config: Any, ckpt: Checkpointer, params: Any, *, update: int, resume: bool, cluster: Cluster
) -> SeatPools | None:
    """The seats' snapshot pools (None without snapshot roles): a resume takes back this
    process's saved pools; a fresh start (or a step saved without them) starts from `params`."""
    seed = derive_seed(config.seed, POOL_SEED_PURPOSE, cluster.index)
    epoch = config.sebulba.env_epoch_updates if config.deterministic else None
    pools = SeatPools(config.seats, seed, epoch)
    if not pools:
        return None
    _begin_pools(pools, ckpt, params, update, resume, cluster)
    return pools


def follow_agent(
    pools: SeatPools,
    agent: str,
    ckpt: Checkpointer,
    params: Any,
    *,
    update: int,
    resume: bool,
    cluster: Cluster,
) -> None:
    """The pools of other agent `agent`'s snapshots in `pools` (a league across agents): a
    resume takes back this process's saved ones; a fresh start starts them from that agent's
    `params` at its update `update`."""
    _begin_pools(pools, ckpt, params, update, resume, cluster, agent)


def _begin_pools(
    pools: SeatPools,
    ckpt: Checkpointer,
    params: Any,
    update: int,
    resume: bool,
    cluster: Cluster,
    agent: str = "",
) -> None:
    host = jax.device_get(local_replica(params))
    saved = ckpt.restore_data(ckpt.latest_step(), "pool") if resume else None
    if saved is None:
        if resume and cluster.is_primary and not agent:
            print(
                f"warning: checkpoint {ckpt.latest_step()} holds no opponent pool; the pools "
                "start again from the resumed params",
                file=sys.stderr,
            )
        pools.start(host, update, agent)
        return
    try:
        pools.restore_bytes(saved, host, agent)
    except Exception as e:  # noqa: BLE001  a cut file, another network's snapshots
        raise ConfigError(
            f"--resume: the opponent pool saved at checkpoint {ckpt.latest_step()} cannot be "
            f"taken back ({first_line(e)}); resume with the run's own config and network"
        ) from None
