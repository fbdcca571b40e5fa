"""The data seam between acting and learning: actors write, the learner loop reads.

Four data flows (`AgentEntry.data` picks one): the on-policy queue (`on_policy.py`), the
uniform replay of segments (`replay.py`), the prioritized replay of n-step transitions
(`prioritized.py`) and the prioritized replay of whole sequences (`sequences.py`, R2D2). All
count env steps where data enters and hand the learner
`Batch`es of `[T + 1, B]` rollouts (the prioritized replay's `T` is its window, `n_step`), so
the trainer loops over a reader and never knows which.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from jaxrl_dist.data import snapshot
from jaxrl_dist.data.base import Batch
from jaxrl_dist.data.on_policy import OnPolicyQueue
from jaxrl_dist.data.prioritized import PrioritizedReplay
from jaxrl_dist.data.replay import UniformReplay
from jaxrl_dist.data.sequences import SequenceReplay
from jaxrl_dist.envs import derive_seed

REPLAY_SEED_PURPOSE = 4  # derive_seed path of each process's replay sampling


def replay_tolerance(config: Any, num_processes: int, per_segment: int = 1) -> float:
    """`config.replay.tolerance`, or when 0 (automatic) room for one sampled batch plus every
    actor thread's rollout in flight, so neither side waits in the steady state. `per_segment`:
    what the replay counts per segment (1, or T transitions)."""
    if config.replay.tolerance:
        return config.replay.tolerance
    spi = config.replay.samples_per_insert * per_segment
    in_flight = config.num_actor_threads * config.rollout_segments(num_processes) * spi
    return float(config.process_batch_size(num_processes) + spi + in_flight)


def env_steps_per_update(flow: str, config: Any) -> float:
    """Env steps the flow takes in per update on average (what schedules are defined over)."""
    spi = config.replay.samples_per_insert
    if flow in ("replay", "sequences"):
        return UniformReplay.env_steps_per_update(
            config.unroll_length, config.replay_batch_size, spi
        )
    if flow == "prioritized":  # a batch of transitions, each inserted one sampled spi times
        return UniformReplay.env_steps_per_update(1, config.replay_batch_size, spi)
    return OnPolicyQueue.env_steps_per_update(config.unroll_length, config.batch_size)


def saves_contents(flow: str, config: Any, obs_shape: tuple[int, ...]) -> bool:
    """Whether checkpoints hold the replay's contents: `config.replay.save`, automatic (None)
    meaning vector observations yes, image frames no (an Atari-sized buffer is GBs)."""
    if flow == "on_policy":
        return False
    save = config.replay.save
    return len(obs_shape) == 1 if save is None else bool(save)


def data_snapshot(data: Any, flow: str, config: Any, spec: Any) -> Callable[[], bytes] | None:
    """What a checkpoint calls for this process's replay contents as bytes, or None when
    they are not saved (`saves_contents`)."""
    if not saves_contents(flow, config, spec.obs_shape):
        return None
    return lambda: snapshot.to_bytes(data.snapshot())


def make_data(
    flow: str,
    config: Any,
    num_processes: int,
    process_index: int,
    stop_writers: threading.Event,
    stop_reading: threading.Event,
) -> OnPolicyQueue | UniformReplay | PrioritizedReplay:
    """This process's data seam for `flow` ("on_policy", "replay", "prioritized" or
    "sequences");
    `stop_writers` ends the actors' waits, `stop_reading` the learner's."""
    batch = config.process_batch_size(num_processes)
    seed = derive_seed(config.seed, REPLAY_SEED_PURPOSE, process_index)
    if flow == "prioritized":
        r, unroll = config.replay, config.unroll_length
        return PrioritizedReplay(
            r.capacity, r.min_size, r.samples_per_insert,
            replay_tolerance(config, num_processes, unroll), batch, seed, stop_writers,
            unroll_length=unroll, n_step=r.n_step, priority_exponent=r.priority_exponent,
            priority_epsilon=r.priority_epsilon, read_stop=stop_reading,
        )  # fmt: skip
    if flow in ("replay", "sequences"):  # whole segments, uniformly or by priority
        r = config.replay
        by_priority = {"priority_exponent": r.priority_exponent,
                       "priority_epsilon": r.priority_epsilon}  # fmt: skip
        cls, extra = (SequenceReplay, by_priority) if flow == "sequences" else (UniformReplay, {})
        return cls(
            r.capacity, r.min_size, r.samples_per_insert, replay_tolerance(config, num_processes),
            batch, seed, stop_writers, read_stop=stop_reading, **extra,
        )  # fmt: skip
    return OnPolicyQueue(
        config.queue_size * config.num_actor_threads,
        batch // config.rollout_segments(num_processes),
        config.max_policy_lag,
        config.deterministic,
        stop_writers,
        stop_reading,
    )


__all__ = [
    "Batch",
    "OnPolicyQueue",
    "PrioritizedReplay",
    "SequenceReplay",
    "UniformReplay",
    "data_snapshot",
    "env_steps_per_update",
    "make_data",
    "saves_contents",
]
