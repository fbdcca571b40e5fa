"""Why and when a run stops: stop requests from any thread, and the signal handlers.

The first SIGINT or SIGTERM asks for a clean stop (actors stop, a final checkpoint, the
summary); a second SIGINT raises KeyboardInterrupt at once (the CLI exits 130).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


class StopControl:
    """The run's stop request: the first reason given wins."""

    def __init__(self):
        self.requested = threading.Event()
        self.reason = ""
        self.signals = 0  # signals received
        self.signal = 0  # the first one's number, 0 if none

    def request(self, reason: str) -> None:
        self.reason = self.reason or reason
        self.requested.set()

    @property
    def by_signal(self) -> bool:
        return self.reason.startswith("SIG")

    @contextlib.contextmanager
    def signal_handlers(self) -> Iterator[None]:
        """SIGINT and SIGTERM handlers while the block runs (main thread only; elsewhere none)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def handler(signum, frame):
            self.signals += 1
            if self.signals > 1 and signum == signal.SIGINT:
                raise KeyboardInterrupt  # a second Ctrl-C: leave at once
            self.signal = self.signal or signum
            self.request(signal.Signals(signum).name)

        previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for s, h in previous.items():
                signal.signal(s, h)
