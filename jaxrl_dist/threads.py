"""Explicit concurrency helpers: every blocking wait has a timeout and checks a stop flag."""

from __future__ import annotations

import queue
import threading
import time
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
