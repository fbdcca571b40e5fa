"""The data flows: how data goes from acting to learning, one definition each.

An agent names its flow (`AgentEntry.data`); `get(name)` is its definition, a `DataFlow`. The
definition is the only place that knows what the flow is: the configs it refuses, how many env
steps an update consumes, whether the learner hands priorities back, what a checkpoint keeps, and
how to build its two implementations:

- `host(...)`, the Sebulba runtime's data seam between threads: actors `write` `QueueItem`s, the
  learner loop `read`s `Batch`es (`data/base.py`);
- `device(config)`, the Anakin runtime's pure piece of the jitted program (`device_flows.py`:
  `init`, `ready`, `learn`), its state in the program's carry.

A new flow is a new `DataFlow` subclass and a `register(name, flow)` call, from a file of its
own (a test registers one); nothing else names a flow.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import jax

import jaxrl_dist.data.snapshot as snapshot
from jaxrl_dist.data.device_flows import (
    OnPolicyFlow,
    PrioritizedFlow,
    prioritized_flow_problem,
    sequence_flow_problem,
)
from jaxrl_dist.data.lockstep_replay import LockstepReplay
from jaxrl_dist.data.on_policy import OnPolicyQueue
from jaxrl_dist.data.prioritized import PrioritizedReplay
from jaxrl_dist.data.replay import UniformReplay
from jaxrl_dist.data.sequences import SequenceReplay
from jaxrl_dist.envs import derive_seed

REPLAY_SEED_PURPOSE = 4  # derive_seed path of each process's replay sampling


class DataFlow:
    """One data flow's definition (the defaults are an on-policy flow's).

    Attributes:
      priorities: the learner's update returns priorities, which go back to the data
        (`LearnerCore.priorities` must say the same).
      replays: the flow keeps what it was given across updates (a replay): a resume takes its
        contents back where checkpoints hold them, and on Anakin the learner's own update count
        differs from the rollouts'.
    """

    priorities: bool = False
    replays: bool = False
    reads: tuple[str, ...] = ()  # the `config.replay` fields it reads (the rest are refused)
    # The run fields of `RUN_FIELDS` it reads: the on-policy queue's back-pressure and lag bound
    # (a run none of whose agents' flows reads one refuses it set, `run/fields.py`).
    run_reads: tuple[str, ...] = ("sebulba.queue_size", "sebulba.max_policy_lag")

    def check(self, config: Any) -> str | None:
        """A `config.replay` field it does not read set to other than its default (it would be
        silently ignored), else `problem`: one line, or None."""
        for field in dataclasses.fields(config.replay):
            value = getattr(config.replay, field.name)
            if field.name not in self.reads and value != field.default:
                reads = ", ".join(f"replay.{name}" for name in self.reads) or "none of them"
                return (
                    f"config.replay.{field.name}={value!r} is not used by config.algorithm="
                    f"{config.algorithm!r} (its data flow reads {reads}); leave it at "
                    f"{field.default!r}"
                )
        return self.problem(config)

    def env_steps_per_update(self, config: Any) -> float:
        """Env steps the flow takes in per learner update, on average (schedules are defined
        over the updates this gives)."""
        return float(config.unroll_length * config.batch_size)

    def problem(self, config: Any) -> str | None:
        """What in `config` this flow cannot serve on any runtime (one line), or None."""
        return None

    def host_problem(self, config: Any) -> str | None:
        """What in `config` its Sebulba data seam cannot serve (one line), or None: the
        on-policy queue's collected batch (deterministic: one unroll of every actor per
        update; synchronous collection: `fraction_samples` of them)."""
        return config.collected_batch_problem(jax.process_count())

    def device_problem(self, config: Any) -> str | None:
        """What in `config` its Anakin implementation cannot serve (one line), or None."""
        return None

    def saves(self, config: Any, obs_shape: tuple[int, ...]) -> bool:
        """Whether Sebulba checkpoints hold the seam's contents (`seam.snapshot()` as bytes,
        per process; a resume calls `seam.restore`). Anakin's carry is saved whole."""
        return False

    def host(
        self,
        config: Any,
        *,
        num_processes: int,
        process_index: int,
        stop_writers: threading.Event,
        stop_reading: threading.Event,
    ) -> Any:
        """This process's data seam: `write`, `read`, `size`, `check_actors` (`data/base.py`),
        and with `priorities` `update_priorities`, with `saves` `snapshot` and `restore`.
        `stop_writers` ends the actors' waits, `stop_reading` the learner's."""
        return OnPolicyQueue(
            maxsize=config.sebulba.queue_size * config.sebulba.num_actor_threads,
            items_per_batch=config.process_batch_size(num_processes)
            // config.rollout_segments(num_processes),
            max_policy_lag=config.sebulba.max_policy_lag,
            in_actor_order=config.deterministic,
            stop_writers=stop_writers,
            stop_reading=stop_reading,
        )

    def device(self, config: Any) -> Any:
        """Its pure Anakin piece (`device_flows.py`) for a config `device_problem` passed."""
        return OnPolicyFlow()


class OnPolicy(DataFlow):
    """Fresh rollouts, each learned from once (IMPALA, PPO): the on-policy queue on Sebulba
    (back-pressure, policy-lag bound, actor order in lockstep), the rollout itself on Anakin.
    It reads no `config.replay` field."""


class Replay(DataFlow):
    """A replay of whole segments: uniform (`"replay"`) or by priority (`"sequences"`, R2D2).
    Its settings are `config.replay`'s, counted in segments."""

    replays = True
    reads = ("capacity", "min_size", "samples_per_insert", "tolerance", "save", "batch_size")
    run_reads = ()  # no queue between actors and learner: the rate limiter paces them

    def __init__(self, by_priority: bool = False):
        self.priorities = by_priority
        if by_priority:
            self.reads = (*self.reads, "priority_exponent", "priority_epsilon")

    unit = "segments"

    def env_steps_per_update(self, config: Any) -> float:
        """A batch of segments, each inserted one sampled `samples_per_insert` times."""
        return config.unroll_length * config.replay_batch_size / config.replay.samples_per_insert

    def problem(self, config: Any) -> str | None:
        r, batch = config.replay, config.replay_batch_size
        if r.capacity < batch:
            name = "replay.batch_size" if r.batch_size else "batch_size"
            return (
                f"config.replay.capacity={r.capacity} is smaller than config.{name}={batch} "
                f"(the {self.unit} of one update); make the capacity at least the batch"
            )
        return None

    def host_problem(self, config: Any) -> str | None:
        if config.sebulba.sync_collection:
            return (
                f"config.sebulba.sync_collection=True: algorithm {config.algorithm!r} learns from "
                "a "
                "replay, where batches are sampled, not collected; leave it False"
            )
        return None

    def device_problem(self, config: Any) -> str | None:
        if self.priorities:  # R2D2's sequences: the device replay of `device_sequences.py`
            return sequence_flow_problem(config)
        return (
            f"config.algorithm={config.algorithm!r} learns from a uniform replay of whole "
            "segments, which config.runtime='anakin' does not hold yet; use "
            "config.runtime='sebulba'"
        )

    def device(self, config: Any) -> Any:
        if self.priorities:
            return PrioritizedFlow.of_sequences(config)
        return super().device(config)

    def saves(self, config: Any, obs_shape: tuple[int, ...]) -> bool:
        """`config.replay.save`; automatic (None): vector observations yes, image frames no
        (an Atari-sized buffer is GBs)."""
        save = config.replay.save
        return len(obs_shape) == 1 if save is None else bool(save)

    def host(self, config, *, num_processes, process_index, stop_writers, stop_reading):
        r = config.replay
        by_priority = {}
        if self.priorities:
            by_priority = {
                "priority_exponent": r.priority_exponent,
                "priority_epsilon": r.priority_epsilon,
            }
        cls = SequenceReplay if self.priorities else UniformReplay
        replay = cls(
            **replay_settings(config, num_processes, process_index),
            stop=stop_writers,
            read_stop=stop_reading,
            **by_priority,
        )
        return in_lockstep(replay, config, num_processes, process_index, stop_writers, stop_reading)


class PrioritizedTransitions(Replay):
    """A prioritized replay of n-step transitions (Rainbow): `config.replay` counted in
    transitions; on Anakin, the same replay on the device."""

    unit = "transitions"

    def __init__(self):
        super().__init__(by_priority=True)
        self.reads = (*self.reads, "n_step")

    def env_steps_per_update(self, config: Any) -> float:
        """A batch of transitions, each inserted one sampled `samples_per_insert` times."""
        return config.replay_batch_size / config.replay.samples_per_insert

    def problem(self, config: Any) -> str | None:
        problem = super().problem(config)
        if problem:
            return problem
        r, unroll = config.replay, config.unroll_length
        if r.n_step >= unroll:
            return (
                f"config.replay.n_step={r.n_step} is not shorter than config.unroll_length="
                f"{unroll}: a window is cut at its segment's end, so most would be short; make "
                "unroll_length larger than n_step"
            )
        if r.capacity < unroll:
            return (
                f"config.replay.capacity={r.capacity} transitions holds no segment of "
                f"config.unroll_length={unroll}; make the capacity at least that"
            )
        held = r.capacity // unroll * unroll  # whole segments
        if r.min_size > held:
            enough = -(-r.min_size // unroll) * unroll
            return (
                f"config.replay.min_size={r.min_size} is more than the {held} transitions the "
                f"replay holds (whole segments of unroll_length={unroll}), so learning would "
                f"never start; make min_size at most {held} or capacity at least {enough}"
            )
        return None

    def device_problem(self, config: Any) -> str | None:
        return prioritized_flow_problem(config)

    def host(self, config, *, num_processes, process_index, stop_writers, stop_reading):
        r = config.replay
        replay = PrioritizedReplay(
            **replay_settings(config, num_processes, process_index, config.unroll_length),
            stop=stop_writers,
            read_stop=stop_reading,
            unroll_length=config.unroll_length,
            n_step=r.n_step,
            priority_exponent=r.priority_exponent,
            priority_epsilon=r.priority_epsilon,
        )
        return in_lockstep(replay, config, num_processes, process_index, stop_writers, stop_reading)

    def device(self, config: Any) -> PrioritizedFlow:
        return PrioritizedFlow.of(config)


def in_lockstep(
    replay: Any,
    config: Any,
    num_processes: int,
    process_index: int,
    stop: threading.Event,
    read_stop: threading.Event,
) -> Any:
    """`replay` fed in rounds of every actor's unroll in deterministic mode
    (`lockstep_replay.py`), else itself."""
    if not config.deterministic:
        return replay
    n = config.sebulba.num_actor_threads
    return LockstepReplay(
        replay,
        actors=range(process_index * n, (process_index + 1) * n),
        items_per_unroll=config.streams_per_actor // config.rollout_segments(num_processes),
        epoch_updates=config.sebulba.env_epoch_updates,
        stop=stop,
        read_stop=read_stop,
    )


def replay_settings(
    config: Any, num_processes: int, process_index: int, per_segment: int = 1
) -> dict[str, Any]:
    """A host replay's settings from `config.replay` for this process: its share of the batch,
    its own sampling seed (`per_segment`: what the replay counts per segment, 1 or T)."""
    r = config.replay
    return {
        "capacity": r.capacity,
        "min_size": r.min_size,
        "samples_per_insert": r.samples_per_insert,
        "tolerance": replay_tolerance(config, num_processes, per_segment),
        "batch_size": config.process_batch_size(num_processes),
        "seed": derive_seed(config.seed, REPLAY_SEED_PURPOSE, process_index),
    }


def replay_tolerance(config: Any, num_processes: int, per_segment: int = 1) -> float:
    """`config.replay.tolerance`, or when 0 (automatic) room for one sampled batch plus every
    actor thread's rollout in flight, so neither side waits in the steady state. `per_segment`:
    what the replay counts per segment (1, or T transitions)."""
    if config.replay.tolerance:
        return config.replay.tolerance
    spi = config.replay.samples_per_insert * per_segment
    in_flight = config.sebulba.num_actor_threads * config.rollout_segments(num_processes) * spi
    return float(config.process_batch_size(num_processes) + spi + in_flight)


def snapshot_bytes(seam: Any) -> bytes:
    """A seam's `snapshot()` as the bytes a checkpoint keeps per process."""
    return snapshot.to_bytes(seam.snapshot())


FLOWS: dict[str, DataFlow] = {
    "on_policy": OnPolicy(),
    "replay": Replay(),
    "prioritized": PrioritizedTransitions(),
    "sequences": Replay(by_priority=True),
}


def get(name: str) -> DataFlow:
    """The flow an agent registered with `data=name` learns from."""
    if name not in FLOWS:
        raise KeyError(f"no data flow {name!r}; registered: {sorted(FLOWS)}")
    return FLOWS[name]


def register(name: str, flow: DataFlow) -> None:
    """Makes `AgentEntry(..., data=name)` learn from `flow` (replacing a flow of that name)."""
    FLOWS[name] = flow
