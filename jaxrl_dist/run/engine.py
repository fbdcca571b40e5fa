"""The fourth seam: an engine advances training, the run shell (`trainer.py`) does the rest.

Everything about running (stops, schedules, run-time hyperparameters, hooks, evaluation,
logs, checkpoints and resume, the summary) is the shell's, written once. An engine holds the
training state and advances it one step at a time, in two halves around the processes'
agreement:

    ready = engine.prepare(budget, at_update)  # this process's part: its updates (at most
                                               # budget; process 0's count wins), its batch
    ... every process agrees to step, or to stop (`agreement.py`) ...
    stepped = engine.advance(n, at_update)     # the step (collectives: every process alike)

Two engines: Sebulba (`jaxrl_dist/sebulba`: actor threads, the data seam, the learner, params
publishing) and Anakin (`jaxrl_dist/anakin`: the carry and its compiled chunk). `config.runtime`
names one in `ENGINES` (`config/engines.py`; `register_engine` adds another, from research
code). Each declares the run fields it honours beyond the shell's (`uses`) and those it cannot
(`refuses`; `fields.py`).
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from jaxrl_dist.errors import NonFiniteError, RunError
from jaxrl_dist.run.layout import Layout
from jaxrl_dist.run.logger import MetricLogger
from jaxrl_dist.types import PyTree

if TYPE_CHECKING:  # the seam's types; these modules import this one
    from jaxrl_dist.checkpoints.store import Checkpointer
    from jaxrl_dist.config import TrainConfig
    from jaxrl_dist.data import DataFlow
    from jaxrl_dist.envs import EnvSpec
    from jaxrl_dist.evaluation.base import Evaluator
    from jaxrl_dist.evaluation.video import EvalVideos
    from jaxrl_dist.learning.distributed import Cluster
    from jaxrl_dist.learning.mesh import Devices
    from jaxrl_dist.run.counters import Counters
    from jaxrl_dist.run.prepared import Prepared


class Ready(NamedTuple):
    """This process's part of the agreement before a step (`prepare`).

    Attributes:
      updates: updates the step would make (every process makes process 0's count).
      env_steps, dropped, restarts, episodes: what this process counted since its last report
        (Sebulba: its data seam's env steps, its stragglers, its actors' restarts and
        episodes); summed over the processes by the agreement.
      stopped: the engine will not step: a stop was asked for (Sebulba: its data seam saw it
        before a batch came).
      failure: what ended this process's data (an actor beyond its restart budget, ...).
      ready: the engine's learners (lanes) whose batch is ready here, a bitmask; every
        process's are ANDed, and `advance` gets the result (no step when it is 0; Sebulba
        serves the ready lanes in turn, `sebulba/rotation.py`).
    """

    updates: int = 1
    env_steps: int = 0
    dropped: int = 0
    restarts: int = 0
    episodes: int = 0
    stopped: bool = False
    failure: RunError | None = None
    ready: int = 1


class Stepped(NamedTuple):
    """What a step did, the same on every process (`advance`).

    Attributes:
      metrics: the last update's metrics (host floats).
      env_steps, episodes: what the step itself counted (Anakin: over the global batch); 0
        where the data seam counted them before the step (`Ready`).
    """

    metrics: dict[str, float]
    env_steps: int = 0
    episodes: int = 0


class Saved(NamedTuple):
    """What a checkpoint of the engine holds at one step.

    Attributes:
      state: the tree every process saves together (Orbax).
      meta: more JSON for the step's meta.
      replay: an optional tree of global arrays (deterministic mode's recorded env actions).
      process_items: bytes each process saves its own of (`checkpoint.PROCESS_ITEMS`).
    """

    state: PyTree
    meta: dict[str, Any] = {}
    replay: PyTree | None = None
    process_items: dict[str, bytes] = {}


class Engine(abc.ABC):
    """What advances training. Built by the shell after `preflight.prepare` passed, with the
    lanes (every agent's view, agent, data flow and warm start) and devices it found
    (`Prepared`); it keeps `config`, `spec` (the env's), `agents` (by name) and `layout` as
    attributes, and never asks how many agents there are (`layout.py` does). Every method runs
    on the main thread; `prepare` and `advance` are called by every process alike, as are
    `digests`, `saved` and `log_record` (they may take part in collectives)."""

    name: ClassVar[str]
    # Its own config section (`config.sebulba`, `config.anakin`; None: none): every other
    # engine's section, set away from its defaults, is refused (`run/fields.py:refusal`).
    section: ClassVar[str | None] = None
    uses: ClassVar[Mapping[str, str]]  # run fields it honours besides SHELL_FIELDS, and how
    refuses: ClassVar[Mapping[str, str]]  # fields it cannot honour, and why
    # Evaluation beside training unless the config says otherwise (`eval_in_background=None`).
    evaluates_beside_by_default: ClassVar[bool] = False
    # A failed step (NonFiniteError) leaves no valid state: it was donated to the update.
    donates_on_failure: ClassVar[bool] = True

    def __init__(
        self,
        config: TrainConfig,
        prepared: Prepared,
        cluster: Cluster,
        stop_requested: threading.Event,
    ):
        """`prepared`: what `preflight.prepare` found (the spec, the devices, and every agent's
        lane: its view, agent, data flow and warm start); `stop_requested`: set when the run
        is asked to stop (an engine's waits for data end on it)."""
        self.config, self.spec, self.devices = config, prepared.spec, prepared.devices
        # Every agent of the run by name (`config.agents`; a one-agent run's: "learner").
        self.agents = {lane.view.name: lane.agent for lane in prepared.lanes}
        self.views = {lane.view.name: lane.view for lane in prepared.lanes}  # built once: preflight
        self.layout = Layout(self.agents)  # how they are written: the one place their count shows
        self._cluster, self._stop_requested = cluster, stop_requested

    # ------------------------------------------------------------------ checks (nothing written)
    @classmethod
    @abc.abstractmethod
    def machine(cls, config: TrainConfig) -> tuple[EnvSpec, Devices]:
        """The env's spec and the device split for `config` on this machine; ConfigError."""

    @classmethod
    def problem(cls, config: TrainConfig, flow: DataFlow) -> str | None:
        """What in `config` this engine cannot run with data flow `flow` (one line), or None;
        the refused fields are checked before (`refusal`)."""
        return None

    @abc.abstractmethod
    def saved_abstract(self) -> PyTree:
        """The tree a checkpoint holds, as a restore target (shapes, dtypes, shardings)."""

    # ------------------------------------------------------------------ the state
    @abc.abstractmethod
    def begin(self, ckpt: Checkpointer, resume: bool) -> dict[str, Any] | None:
        """The initial state: restored from `ckpt`'s latest step (its meta is returned), or
        fresh (from the warm-start params, if any; None)."""

    @abc.abstractmethod
    def saved(self, step: int) -> Saved:
        """What a checkpoint after `step` updates holds."""

    @abc.abstractmethod
    def policy_params(self) -> PyTree:
        """The params a checkpoint's policy and the `save_last` hook get."""

    @abc.abstractmethod
    def eval_params(self) -> PyTree:
        """The params an evaluation plays (Anakin: every seed's), in buffers no later step
        donates (an evaluation beside training plays them while training goes on)."""

    def policy_params_of(self, snapshot: PyTree) -> PyTree:
        """The policy params (`policy_params`'s form) of an `eval_params` snapshot (Anakin:
        its first seed's)."""
        return snapshot

    def take_params(self, snapshot: PyTree) -> None:
        """The learners take back the params of an `eval_params` snapshot (host arrays, the
        same on every process; Anakin: every seed its own), as `load_params` loads them:
        optimizer states and counts go on. A run stopped by an evaluation beside training
        ends with the params that evaluation scored."""
        for name, params in self.layout.params_of(snapshot).items():
            self.load_params(name, params)

    @abc.abstractmethod
    def digests(self) -> tuple[str, str]:
        """(the policy params' digest, the whole state's), the same on every process."""

    @abc.abstractmethod
    def hparams(self) -> dict[str, Any]:
        """The run-time hyperparameters in force (`LearnerCore.hparams`; one seed's)."""

    @abc.abstractmethod
    def set_hparams(self, hparams: dict[str, Any]) -> None:
        """Replaces them (every seed's), from the next step on."""

    # ------------------------------------------------------------------ run-time control
    def params_like(self, name: str) -> PyTree:
        """Agent `name`'s acting params (shapes and dtypes: what params loaded into it must
        fit)."""
        return self.agents[name].params_shapes()

    def load_params(self, name: str, params: PyTree) -> None:
        """Agent `name`'s learner takes `params` (host arrays shaped as `params_like`) from the
        next step on: `LearnerCore.with_params`, as a warm start (its optimizer state and
        counts go on)."""
        raise NotImplementedError(f"the {self.name} engine cannot load params into a run")

    def replay_problem(self, name: str, settings: dict[str, float]) -> str | None:
        """Why agent `name`'s replay cannot take `settings` (`{field: value}` of
        `config.sections.REPLAY_RUNTIME_FIELDS`) while the run goes on (one line), or None."""
        return f"the {self.name} engine's replay settings cannot change while a run goes on"

    def set_replay(self, name: str, settings: dict[str, float]) -> None:
        """Agent `name`'s replay takes `settings` (checked by `replay_problem`)."""
        raise NotImplementedError(self.replay_problem(name, settings))

    # ------------------------------------------------------------------ the run
    @abc.abstractmethod
    def evaluator(self, in_background: bool, workdir: str) -> tuple[Evaluator, EvalVideos | None]:
        """(the evaluator, GIFs every `video_every_evals` evaluations or None) of process 0."""

    # Env steps every update adds where that is fixed (Anakin), so a step can end at the next
    # env-step mark; None where the data decides (Sebulba, one update a step).
    steps_per_update: int | None = None

    def start(self, counters: Counters) -> None:  # noqa: B027  optional: an engine may not act apart
        """Starts acting (actor threads) from the run's `counters`, after `begin`."""

    @abc.abstractmethod
    def prepare(self, budget: int, at_update: int) -> Ready:
        """This process's part of the agreement before the step from update `at_update`: its
        updates, at most `budget` (process 0's count is the one every process makes)."""

    @abc.abstractmethod
    def advance(self, updates: int, at_update: int, ready: int = 1) -> Stepped:
        """The step: `updates` updates from update `at_update`, of a learner set in `ready` (the
        lanes ready on every process); raises NonFiniteError (the state is then not saved) or
        ProcessLostError."""

    @abc.abstractmethod
    def log_record(self, metrics: dict[str, float], counters: Counters) -> dict[str, float]:
        """A log line's record (every process calls it: it may gather)."""

    def summary(self, counters: Counters, evals: list[dict[str, Any]]) -> dict[str, Any]:
        """What the engine adds to `summary.json` (`evals`: the run's evaluation history)."""
        return {}

    def stop(self) -> None:  # noqa: B027  optional, as `start`
        """Stops acting (the actors' threads), on every way out of the run."""


def check_finite(metrics: dict[str, float], where: str) -> None:
    """Raises NonFiniteError naming the non-finite metrics (`where`: "at update 7")."""
    bad = MetricLogger.nonfinite(metrics)
    if bad:
        raise NonFiniteError(f"non-finite {', '.join(bad)} {where}; the last checkpoint is kept")
