"""Evaluation beside training (`config.eval_in_background`): the episodes are played on a thread
while the learner goes on updating; the results are recorded on the learner's thread.

The trainer `submit`s the params of an update (the params store's copy, which no update
donates) with where the run was (`EvalPoint`); the thread plays the episodes (`EvalMonitor.
measure`); at its next update the trainer `collect`s the finished ones and records them
(`EvalMonitor.record`: logs at the snapshot's env steps, best, hooks, stop target), so hooks
and counters stay on one thread.

One evaluation runs at a time, and one request waits: a request made while one runs waits and
starts the moment it ends; a newer request replaces a waiting one (the replaced one is counted
as skipped). So while evaluation keeps up with `eval_every_updates` on average, every requested
snapshot is evaluated, as with blocking evaluation; when it cannot, the newest snapshots are.
With `share < 1` (`config.eval_background_share`) the thread also rests after each evaluation
so that it plays at most that share of the wall time: a bound on what evaluation costs the
actors and the learner (on 2 cores, a thread evaluating without rest cost CartPole's IMPALA
about half its SPS with evaluation every update; README), paid for with fewer evaluations.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from jaxrl_dist.evaluation.base import EvalResult
from jaxrl_dist.run.monitor import EvalMonitor, EvalPoint


class BackgroundEvaluation:
    """One evaluation thread for a run's monitor."""

    def __init__(self, monitor: EvalMonitor, share: float = 1.0, warm_up_params: Any = None):
        """`warm_up_params`: params to compile the evaluator's policies with, first thing on
        the thread (while the learner compiles), so no evaluation compiles beside training."""
        self._monitor = monitor
        self._rest_ratio = 1.0 / share - 1.0  # rest per second of evaluation
        self._lock = threading.Lock()
        self._waiting: tuple[Any, EvalPoint] | None = None  # the next request to play
        self._done: list[tuple[dict[str, EvalResult], EvalPoint, Any]] = []
        self._wake = threading.Event()
        self._busy = False  # an evaluation is being played
        self._closing = False
        self.error: BaseException | None = None
        self.skipped = 0  # waiting requests replaced by newer ones
        self._warm_up_params = warm_up_params
        self._thread = threading.Thread(target=self._loop, name="evaluation", daemon=True)
        self._thread.start()

    def submit(self, params: Any, point: EvalPoint) -> None:
        """Asks for an evaluation of `params` (taken at `point`): played next, unless a newer
        request comes first."""
        self._raise_error()
        with self._lock:
            if self._waiting is not None:
                self.skipped += 1
            self._waiting = (params, point)
        self._wake.set()

    @property
    def idle(self) -> bool:
        """Nothing is being played and nothing waits."""
        with self._lock:
            return not self._busy and self._waiting is None

    def collect(self) -> list[tuple[dict[str, EvalResult], EvalPoint, Any]]:
        """The finished evaluations since the last call: (results, point, params)."""
        self._raise_error()
        with self._lock:
            done, self._done = self._done, []
        return done

    def close(self, timeout_s: float = 60.0) -> bool:
        """Abandons a running evaluation and a waiting request (the run is ending) and stops
        the thread; False if it is still inside one after `timeout_s` (a compile or a GIF
        does not check the abort): then nothing else may use the evaluator."""
        self._closing = True
        self._wake.set()
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def _raise_error(self) -> None:
        if self.error is not None:
            raise self.error

    def _next(self) -> tuple[Any, EvalPoint] | None:
        """Waits for a request; None once closing."""
        while True:
            with self._lock:
                if self._closing:
                    return None
                if self._waiting is not None:
                    request, self._waiting = self._waiting, None
                    self._busy = True
                    return request
                self._wake.clear()
            self._wake.wait()

    def _loop(self) -> None:
        try:
            if self._warm_up_params is not None:
                self._monitor.warm_up(self._warm_up_params)
            self._warm_up_params = None
            while (request := self._next()) is not None:
                params, point = request
                start = time.monotonic()
                results = self._monitor.measure(params, point, abort=lambda: self._closing)
                took = time.monotonic() - start
                with self._lock:
                    if results is not None:
                        self._done.append((results, point, params))
                    self._busy = False
                if self._rest_ratio > 0:  # requests meanwhile wait (the newest one)
                    self._rest(self._rest_ratio * took)
        except BaseException as e:  # noqa: BLE001  raised on the learner's thread
            self.error = e

    def _rest(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while not self._closing and time.monotonic() < end:
            time.sleep(min(0.05, max(0.0, end - time.monotonic())))
