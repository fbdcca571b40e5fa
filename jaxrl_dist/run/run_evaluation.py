"""Process 0's evaluations during a run: blocking on the main thread, or beside training
(`background_eval.py`), and what follows one (a stop, and the params the run then ends with).

Everything here runs on the main thread: a background evaluation's results are recorded
(`land`) there, at the step after they finished, so hooks and counters see one thread.

A run stopped by an evaluation (`stop_at_eval_return`, the stop hook) ends with the params
that evaluation scored. Blocking, those are the params of the update it stopped at. Beside
training, the result lands updates later: the run keeps the evaluated snapshot (`Stopping`),
records no later evaluation, and the trainer gives it back to the learners before the final
save (`take_back`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import numpy as np

from jaxrl_dist.config import TrainConfig
from jaxrl_dist.learning.distributed import Cluster
from jaxrl_dist.run.background_eval import BackgroundEvaluation
from jaxrl_dist.run.counters import Counters
from jaxrl_dist.run.engine import Engine
from jaxrl_dist.run.monitor import EvalPoint
from jaxrl_dist.run.session import Session
from jaxrl_dist.run.stopping import StopControl


class Stopping(NamedTuple):
    """The evaluation that asked the run to stop: where its params were taken, the params (an
    `Engine.eval_params` snapshot) and the reason it gave."""

    point: EvalPoint
    params: Any
    reason: str


class RunEvaluation:
    """A run's evaluations (process 0; a no-op elsewhere, where the session has no monitor)."""

    def __init__(self, config: TrainConfig, stop: StopControl, engine: Engine):
        self._config, self._stop, self._engine = config, stop, engine
        self.background: BackgroundEvaluation | None = None
        self.stopping: Stopping | None = None  # the first evaluation that asked for a stop
        self.dropped = 0  # evaluations that landed after it: not recorded
        self._episode_mark = 0  # eval_every_episodes: the multiples of it passed so far

    def start(self, run: Session) -> None:
        """Starts the evaluation thread where evaluation is beside training; it compiles the
        evaluator's policies first, while the learner compiles."""
        every = self._config.eval_every_episodes
        self._episode_mark = run.counters.episodes // every if every else 0  # a resume's too
        if run.monitor is not None and run.eval_beside:
            share = self._config.eval_background_share
            params = self._engine.eval_params()
            self.background = BackgroundEvaluation(run.monitor, share, warm_up_params=params)

    def after_step(self, run: Session) -> None:
        """After every step: an evaluation when one is due (a step never crosses an update
        mark; an episode mark is known only once the step's episodes are counted, so the
        evaluation follows the step that crossed it), and the finished ones recorded."""
        if self._due(run.counters):
            self.evaluate(run, blocking=self.background is None)
        if self.background is not None:
            self.land(run)

    def _due(self, counters: Counters) -> bool:
        cfg = self._config
        if cfg.eval_every_episodes:
            mark = counters.episodes // cfg.eval_every_episodes
            due, self._episode_mark = mark > self._episode_mark, mark
            return due
        every = cfg.eval_every_updates
        return bool(every) and counters.updates % every == 0

    def evaluate(self, run: Session, blocking: bool = True) -> None:
        """Evaluates the newest params (and calls the evaluation hooks); not `blocking`: a
        snapshot of them goes to the evaluation thread, recorded by `land` once played."""
        if run.monitor is None:
            return
        counters, params = run.counters, self._engine.eval_params()
        point = EvalPoint(counters.env_steps, counters.updates, run.clock())
        if not blocking:
            self.background.submit(params, point)
            return
        results = run.monitor.measure(params, point, abort=lambda: self._stop.signals > 0)
        if results is not None:  # else a signal: stop promptly, without this evaluation
            self._record(run, results, point, params)

    def land(self, run: Session) -> None:
        """Records the background evaluations that finished (none after one that asked for a
        stop: the run ends with that one's params)."""
        for results, point, params in self.background.collect():
            if self.stopping is not None:
                self.dropped += 1
                continue
            self._record(run, results, point, params)

    def _record(self, run: Session, results: Any, point: EvalPoint, params: Any) -> None:
        _, stop_reason = run.monitor.record(results, point, params, run.counters)
        if stop_reason:
            self.stopping = Stopping(point, params, stop_reason)
            self._stop.request(stop_reason)

    def take_back(self, run: Session, cluster: Cluster, engine: Engine) -> int | None:
        """A run stopped by an evaluation beside training ends with the params it scored: every
        process's learners take back that snapshot (process 0's, sent to all) before the final
        save. Every process calls this. Returns its update, or None (nothing to take back)."""
        stopping = self.to_take_back(run.counters.updates) if cluster.is_primary else None
        update = int(
            cluster.gather(np.int64(-1 if stopping is None else stopping.point.updates))[0]
        )
        if update < 0:
            return None
        if stopping is not None:
            snapshot = jax.device_get(stopping.params)
        else:  # the same shapes, filled with process 0's values
            snapshot = jax.tree.map(lambda x: np.zeros(x.shape, x.dtype), engine.eval_params())
        engine.take_params(jax.tree.map(lambda x: cluster.gather(x)[0], snapshot))
        run.progress.message(
            f"update {run.counters.updates}: the learners took back the params of update "
            f"{update}, which the stopping evaluation scored"
        )
        return update

    def to_take_back(self, updates: int) -> Stopping | None:
        """The stopping evaluation whose params the learners must take back before the final
        save: the run stopped for it (its reason came first) and the learners have moved on
        from its snapshot (to `updates`)."""
        stopping = self.stopping
        if stopping is None or self._stop.reason != stopping.reason:
            return None
        return stopping if stopping.point.updates != updates else None

    def stop_thread(self, run: Session) -> bool:
        """Stops the evaluation thread (if any); False if it is stuck inside an evaluation:
        its evaluator is then left open and unused (no final evaluation)."""
        if self.background is None or self.background.close():
            return True
        run.progress.message(
            "warning: the evaluation thread did not stop within 60 s; no final evaluation"
        )
        run.monitor.leave_open()
        return False

    def finish(self, run: Session, land: bool, evaluate: bool) -> None:
        """At the end: a running evaluation is abandoned, the finished ones are recorded
        (`land`), then (`evaluate`) a final blocking one unless the last was of these params."""
        if not self.stop_thread(run):
            return
        if land and self.background is not None:
            self.land(run)
        if not evaluate or self.to_take_back(run.counters.updates) is not None:
            return  # the stopping evaluation is of the params the run ends with
        last = run.counters.last_eval
        if last is None or last["updates"] != run.counters.updates:
            self.evaluate(run)

    def log_record(self) -> dict[str, float]:
        """For the log line: requests replaced before they were played."""
        return {} if self.background is None else {"stats/eval_skipped": self.background.skipped}
