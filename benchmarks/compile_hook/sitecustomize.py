"""Records where every Python process's compile time goes, for `suite_time.py --compile-census`.

On `PYTHONPATH`, Python imports this file at start-up in every process of the suite (pytest's
workers and each process they start). Once a process imports JAX (not before: importing it here
would add JAX's import to processes that never use it), JAX's own monitoring events are
appended, one JSON line each, to `$JAXRL_DIST_COMPILE_CENSUS/<pid>.jsonl`: tracing, lowering and
backend-compile durations by function name, persistent-cache hits, with the pytest test running
(`PYTEST_CURRENT_TEST`, which child processes inherit); at exit, the process's CPU seconds.
`compile_census.py` adds them up.
"""

import atexit
import importlib.abc
import importlib.util
import json
import os
import sys
import threading

_DIR = os.environ.get("JAXRL_DIST_COMPILE_CENSUS")
_FILE = None


def _write(record: dict) -> None:
    global _FILE
    if _FILE is None:
        _FILE = open(os.path.join(_DIR, f"{os.getpid()}.jsonl"), "a", buffering=1)  # noqa: SIM115
    record["test"] = os.environ.get("PYTEST_CURRENT_TEST")
    record["thread"] = threading.get_ident()  # a cache hit is its own thread's next compile
    _FILE.write(json.dumps(record) + "\n")


def _listen(monitoring) -> None:
    def duration(event: str, seconds: float, **kwargs) -> None:
        _write({"event": event, "seconds": seconds, "fun": str(kwargs.get("fun_name"))})

    monitoring.register_event_duration_secs_listener(duration)
    monitoring.register_event_listener(lambda event, **kwargs: _write({"event": event}))


class _AfterMonitoring(importlib.abc.MetaPathFinder):
    """Registers the listeners as soon as JAX's monitoring module has loaded."""

    def find_spec(self, name, path, target=None):
        if name != "jax._src.monitoring":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            _listen(module)

        spec.loader.exec_module = exec_module
        return spec


def _at_exit() -> None:
    if _FILE is not None:  # a process that imported JAX
        times = os.times()
        _write({"event": "exit", "cpu_s": times.user + times.system, "argv": sys.argv[:3]})


if _DIR:
    sys.meta_path.insert(0, _AfterMonitoring())
    atexit.register(_at_exit)
