"""Suite-wide set-up: JAX's persistent compilation cache and a cheaper compile for every run the
tests start, and the longest files first.

Most of the suite's time is spent in short training runs (in this process and in subprocesses),
each compiling the same few programs (the act step, the update, the evaluator) again. With the
cache, a program compiled once is read back from disk by every later run that builds the same
one, here, in the other pytest-xdist worker and in child processes (they inherit these
variables). The cache lives in the checkout (`.jax_cache/`, ignored by git): a fresh clone
starts cold, so CI measures a cold start; set JAX_COMPILATION_CACHE_DIR to put it elsewhere.

Compilation is most of the suite's time (measured: about 60% of its CPU time on a cold cache),
so the tests compile without LLVM's optimisations (`--xla_backend_optimization_level=0` in
`XLA_FLAGS`, inherited by subprocesses; a level set by the caller wins): measured, about a
third less time per cold compile, while most test programs run for well under a second (the
`:quick` Atari configs, whose unoptimised convolutions are slow, run few updates: IMPALA 4,
PPO 1; PPO's Atari run, about 3x slower unoptimised, runs in a subprocess at XLA's default
level). The
programs are the same ops at the same precision; runs outside the suite use XLA's default.

pytest-xdist hands each worker whole files as it frees up (`--dist loadfile`): the files that
take longest are collected first (`LONGEST_FIRST`), so no long file starts last on one worker
while the other idles.
"""

import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Before anything imports jax: jax reads these when it is first imported.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(ROOT, ".jax_cache"))
# Cache every program, however quick to compile: the suite's programs are small.
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
if "--xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    flags = os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0"
    os.environ["XLA_FLAGS"] = flags.strip()

# The files that take longest (seconds on a cold 2-core run), in the order they start.
LONGEST_FIRST = (
    "test_multiprocess.py",
    "test_recurrent.py",
    "test_benchmarks.py",
    "test_gpu_check.py",
    "test_reliability.py",
    "test_four_devices.py",
    "test_train_e2e.py",
    "test_anakin_games.py",
    "test_anakin_rainbow.py",
    "test_learning_harness.py",
    "test_anakin.py",
    "test_rainbow_agent.py",
    "test_q_ops.py",
    "test_r2d2.py",
    "test_rainbow_faults.py",
)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list) -> None:
    """Files in `LONGEST_FIRST` order, then the rest as collected; tests in a file keep their
    order (a stable sort)."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(os.path.basename(str(item.fspath)), len(rank)))
