"""Compilation: JAX's persistent cache on by default, and what compiling costs a run.

A run's start-up is mostly compiling (the update, the act step, the evaluator): on an H100
Breakout took about 90 s from launch to its first steady window cold and 36 s with a warm
cache. So every run uses a persistent compilation cache unless told not to:

- `JAX_COMPILATION_CACHE_DIR` (JAX's own variable) wins where it is set;
- else `JAXRL_DIST_COMPILATION_CACHE`: a directory, or `off` to run without a cache;
- else `$XDG_CACHE_HOME/jaxrl_dist/jax` (`~/.cache/jaxrl_dist/jax`), one per user.

JAX reads the setting at its first compile: `use_compilation_cache()` runs before the run
compiles anything (`scripts/train.py`, the `Trainer`); in a process that compiled before, it
changes nothing. In the directory it chooses, it keeps every program that took 0.05 s to
compile (JAX's default, 1 s, misses most of a run's programs) and at most 4 GiB, the least
recently used going first (`JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS` and
`JAX_COMPILATION_CACHE_MAX_SIZE` win where set).

`CompileTotals` adds up JAX's own compile events in this process: `compiles`, the XLA programs
built (compiled, or read back from the cache: `cache_hits` of them), `backend_s` the seconds
that took, `trace_s` and `lower_s` the tracing and lowering before it. A run logs their growth
(`compile/*` in `metrics.jsonl`, `compile` in `summary.json`, and a line at its first step).
"""

from __future__ import annotations

import os
import threading

import jax
from jax import monitoring

CACHE_VARIABLE = "JAXRL_DIST_COMPILATION_CACHE"
OFF = ("off", "none", "0", "false", "")
MIN_COMPILE_S = 0.05  # keep every program that took this long to compile (JAX's default: 1 s)
MAX_SIZE_BYTES = 4 << 30  # the cache's cap on disk


def default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "jaxrl_dist", "jax")


def use_compilation_cache() -> str | None:
    """Points JAX's persistent cache at the chosen directory (see the module docstring) unless
    it is configured already or turned off; returns the directory in use, or None."""
    current = jax.config.jax_compilation_cache_dir
    if current:
        return current
    chosen = os.environ.get(CACHE_VARIABLE, default_cache_dir())
    if chosen.strip().lower() in OFF:
        return None
    jax.config.update("jax_compilation_cache_dir", os.path.expanduser(chosen))
    # JAX keeps only programs that took 1 s to compile; a run's start-up is many smaller ones
    # (measured on 2 CPU cores: CartPole's 16 programs take 2.8 s together, none over 1 s).
    if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_S)
    if "JAX_COMPILATION_CACHE_MAX_SIZE" not in os.environ:  # least recently used go first
        jax.config.update("jax_compilation_cache_max_size", MAX_SIZE_BYTES)
    return jax.config.jax_compilation_cache_dir


# JAX's event names (jax/_src/dispatch.py, compiler.py, compilation_cache.py) -> ours.
DURATIONS = {
    "/jax/core/compile/jaxpr_trace_duration": "trace_s",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower_s",
    "/jax/core/compile/backend_compile_duration": "backend_s",
}
COUNTS = {
    "/jax/compilation_cache/cache_hits": "cache_hits",
    "/jax/compilation_cache/cache_misses": "cache_misses",
}


class CompileTotals:
    """This process's compile totals since it started listening (one listener per process:
    JAX cannot remove one). Thread-safe: actors, learner and evaluators compile at once."""

    _lock = threading.Lock()
    _totals: dict[str, float] = {}
    _listening = False

    @classmethod
    def listen(cls) -> None:
        with cls._lock:  # registered before anyone can snapshot: no compile goes uncounted
            if cls._listening:
                return
            cls._totals.update(dict.fromkeys([*DURATIONS.values(), "compiles"], 0.0))
            cls._totals.update(dict.fromkeys(COUNTS.values(), 0.0))
            monitoring.register_event_duration_secs_listener(cls._on_duration)
            monitoring.register_event_listener(cls._on_event)
            cls._listening = True

    @classmethod
    def _on_duration(cls, event: str, seconds: float, **_: object) -> None:
        name = DURATIONS.get(event)
        if name is not None:
            with cls._lock:
                cls._totals[name] += seconds
                cls._totals["compiles"] += name == "backend_s"

    @classmethod
    def _on_event(cls, event: str, **_: object) -> None:
        name = COUNTS.get(event)
        if name is not None:
            with cls._lock:
                cls._totals[name] += 1

    @classmethod
    def snapshot(cls) -> dict[str, float]:
        with cls._lock:
            return dict(cls._totals)

    @staticmethod
    def since(start: dict[str, float]) -> dict[str, float]:
        """The totals' growth since `start` (a `snapshot()`), rounded for the log."""
        now = CompileTotals.snapshot()
        return {k: round(v - start.get(k, 0.0), 3) for k, v in now.items()}
