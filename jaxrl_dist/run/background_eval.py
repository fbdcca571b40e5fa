"""Evaluation beside training (`config.eval_in_background`): the episodes are played on a thread
while the learner goes on updating; the results are recorded on the learner's thread.

The trainer `submit`s the params of an update (the params store's copy, which no update
donates) with where the run was (`EvalPoint`); the thread plays the episodes (`EvalMonitor.
measure`); at its next update the trainer `collect`s the finished ones and records them
(`EvalMonitor.record`: logs at the snapshot's env steps, best, hooks, stop target), so hooks
and counters stay on one thread. One evaluation runs at a time: a request while one runs is
skipped (counted), so "every update" means "as often as evaluation keeps up". After each
evaluation the thread also rests, so that it plays at most `share` of the wall time
(`config.eval_background_share`): the evaluation's Python loop holds the GIL and a core that
the actors and the learner need, and on a 2-core machine an evaluation thread that never rests
costs about a quarter of the training SPS (measured; README).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from jaxrl_dist.run.evaluation import EvalResult
from jaxrl_dist.run.monitor import EvalMonitor, EvalPoint


class BackgroundEvaluation:
    """One evaluation thread for a run's monitor."""

    def __init__(self, monitor: EvalMonitor, share: float = 1.0, warm_up_params: Any = None):
        """`warm_up_params`: params to compile the evaluator's policies with, first thing on
        the thread (while the learner compiles), so no evaluation compiles beside training."""
        self._monitor = monitor
        self._rest_ratio = 1.0 / share - 1.0  # rest per second of evaluation
        self._lock = threading.Lock()
        self._request: tuple[Any, EvalPoint] | None = None
        self._done: list[tuple[dict[str, EvalResult], EvalPoint, Any]] = []
        self._wake = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._closing = False
        self._busy_until = 0.0  # monotonic time before which a request is skipped (rest)
        self.error: BaseException | None = None
        self.skipped = 0  # requests made while an evaluation ran (or it rested)
        self._warm_up_params = warm_up_params
        self._thread = threading.Thread(target=self._loop, name="evaluation", daemon=True)
        self._thread.start()

    def submit(self, params: Any, point: EvalPoint) -> bool:
        """Asks for an evaluation of `params` (taken at `point`); False if one runs or the
        thread rests (skipped)."""
        self._raise_error()
        with self._lock:
            if not self._idle.is_set() or time.monotonic() < self._busy_until:
                self.skipped += 1
                return False
            self._idle.clear()
            self._request = (params, point)
        self._wake.set()
        return True

    def collect(self) -> list[tuple[dict[str, EvalResult], EvalPoint, Any]]:
        """The finished evaluations since the last call: (results, point, params)."""
        self._raise_error()
        with self._lock:
            done, self._done = self._done, []
        return done

    def close(self, timeout_s: float = 60.0) -> bool:
        """Abandons a running evaluation (the run is ending) and stops the thread; False if
        it is still inside one after `timeout_s` (a compile or a GIF does not check the
        abort): then nothing else may use the evaluator."""
        self._closing = True
        self._wake.set()
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def _raise_error(self) -> None:
        if self.error is not None:
            raise self.error

    def _loop(self) -> None:
        try:
            if self._warm_up_params is not None:
                self._monitor.warm_up(self._warm_up_params)
        except BaseException as e:  # noqa: BLE001  raised on the learner's thread
            self.error = e
            return
        self._warm_up_params = None
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._closing:
                return
            params, point = self._request
            start = time.monotonic()
            try:
                results = self._monitor.measure(params, point, abort=lambda: self._closing)
            except BaseException as e:  # noqa: BLE001  raised on the learner's thread
                self.error = e
                return
            took = time.monotonic() - start
            with self._lock:
                if results is not None:
                    self._done.append((results, point, params))
                self._busy_until = time.monotonic() + self._rest_ratio * took
                self._idle.set()
