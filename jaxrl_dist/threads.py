"""Explicit concurrency helpers: every blocking wait has a timeout and checks a stop flag."""

from __future__ import annotations

import contextlib
import queue
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

# Every blocking call wakes at least this often to check the stop flag.
POLL_S = 0.1


def put_until_stopped(q: queue.Queue, item: Any, stop: threading.Event) -> float:
    """Puts `item` into the bounded queue `q`, waiting for room in `POLL_S` slices until `stop`
    is set (then the item is dropped). Returns the seconds spent waiting."""
    start = time.perf_counter()
    while not stop.is_set():
        try:
            q.put(item, timeout=POLL_S)
            break
        except queue.Full:
            continue
    return time.perf_counter() - start


@contextlib.contextmanager
def switch_interval(seconds: float) -> Iterator[None]:
    """CPython's GIL switch interval set to `seconds` inside the block (0: left as it is), put
    back after. A thread blocked on the GIL while another runs Python waits up to this long: a
    GIL-free call (an XLA step, an EnvPool recv) that returns beside a busy Python thread pays
    it on every return (5 ms by default)."""
    before = sys.getswitchinterval()
    if seconds:
        sys.setswitchinterval(seconds)
    try:
        yield
    finally:
        sys.setswitchinterval(before)
