"""Process 0's evaluations during a run: blocking on the main thread, or beside training
(`background_eval.py`), and what follows one (a new best to save, a stop).

Everything here runs on the main thread: a background evaluation's results are recorded
(`land`) there, at the step after they finished, so hooks and counters see one thread.
"""

from __future__ import annotations

from jaxrl_dist.config import TrainConfig
from jaxrl_dist.run.background_eval import BackgroundEvaluation
from jaxrl_dist.run.counters import Counters
from jaxrl_dist.run.engine import Engine
from jaxrl_dist.run.monitor import EvalPoint
from jaxrl_dist.run.session import Session
from jaxrl_dist.run.stopping import StopControl


class RunEvaluation:
    """A run's evaluations (process 0; a no-op elsewhere, where the session has no monitor)."""

    def __init__(self, config: TrainConfig, stop: StopControl, engine: Engine):
        self._config, self._stop, self._engine = config, stop, engine
        self.background: BackgroundEvaluation | None = None
        self.best_to_save = False  # a new best with keep_best_checkpoints: save it (agreed)
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
        counters = run.counters
        if not blocking:
            point = EvalPoint(counters.env_steps, counters.updates, run.clock())
            self.background.submit(self._engine.eval_params(), point)
            return
        params, signalled = self._engine.eval_params(), lambda: self._stop.signals > 0
        outcome = run.monitor.evaluate(params, counters, run.clock(), signalled)
        if outcome is not None:  # else a signal: stop promptly, without this evaluation
            self._after(*outcome)

    def land(self, run: Session) -> None:
        """Records the background evaluations that finished."""
        for results, point, params in self.background.collect():
            self._after(*run.monitor.record(results, point, params, run.counters))

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
        if not evaluate:
            return
        last = run.counters.last_eval
        if last is None or last["updates"] != run.counters.updates:
            self.evaluate(run)

    def log_record(self) -> dict[str, float]:
        """For the log line: requests replaced before they were played."""
        return {} if self.background is None else {"stats/eval_skipped": self.background.skipped}

    def _after(self, report, stop_reason: str) -> None:
        if report.best and self._config.keep_best_checkpoints:
            self.best_to_save = True
        if stop_reason:
            self._stop.request(stop_reason)
