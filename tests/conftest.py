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
level). XLA:CPU's newer MLIR fusion emitters compile a fusion about twice as slowly as the LLVM
IR emitter they replace, so the tests use the latter (`--xla_cpu_use_fusion_emitters=false`,
tried in a child process first: an XLA that no longer knows the flag would abort). The
programs are the same ops at the same precision; runs outside the suite use XLA's default,
as does a test marked `optimised`, whose time is in running its programs (`xla_level.py`).

Each worker freezes what outlives a file (`gc.freeze`), so Python's full collections stop
walking JAX's caches again and again, and leaves with `os._exit` once its results are in.

pytest-xdist hands each worker whole files as it frees up (`--dist loadfile`): the files that
take longest are collected first (`LONGEST_FIRST`), so no long file starts last on one worker
while the other idles.
"""

import gc
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Before anything imports jax: jax reads these when it is first imported.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(ROOT, ".jax_cache"))
# Cache every program, however quick to compile: the suite's programs are small.
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")


def _xla_accepts(flag: str) -> bool:
    """Whether this jaxlib's XLA knows `flag`: XLA aborts the process on an unknown one, so a
    child process tries it (about a second, once per suite: the workers inherit the answer)."""
    env = {**os.environ, "XLA_FLAGS": flag, "JAX_PLATFORMS": "cpu"}
    probe = [sys.executable, "-c", "import jax; jax.devices()"]
    return subprocess.run(probe, env=env, capture_output=True, timeout=120).returncode == 0


def _add_xla_flag(name: str, value: str, probe: bool = False) -> None:
    """Appends `--name=value` to `XLA_FLAGS` unless it is there already (the caller's wins).
    `probe`: a flag a newer XLA may drop, tried in a child first; a refusal is remembered in
    `PROBED`, so the workers (which inherit the environment) do not try it again."""
    flags = os.environ.get("XLA_FLAGS", "")
    probed = os.environ.get(PROBED, "").split()
    if f"--{name}" in flags or name in probed:
        return
    if probe:
        os.environ[PROBED] = " ".join([*probed, name])
        if not _xla_accepts(f"--{name}={value}"):
            return
    os.environ["XLA_FLAGS"] = f"{flags} --{name}={value}".strip()


PROBED = "JAXRL_DIST_TEST_XLA_PROBED"
_add_xla_flag("xla_backend_optimization_level", "0")
# XLA:CPU's newer MLIR fusion emitters take about twice as long to compile a fusion as the
# LLVM IR emitter they replace (measured: the 4-device Anakin check's backend compile 11.6 s ->
# 6.2 s, the suite 8 min 22 s -> 6 min 9 s back to back); same HLO, same precision.
_add_xla_flag("xla_cpu_use_fusion_emitters", "false", probe=True)

# The files that take longest (seconds on a cold 2-core run), in the order they start.
LONGEST_FIRST = (
    "test_multiprocess.py",
    "test_multiprocess_agents.py",
    "test_multiprocess_envs.py",
    "test_docs.py",
    "test_learning_claims.py",
    "test_checkpoint_damage.py",
    "test_recurrent_runs.py",
    "test_recurrent.py",
    "test_own_envs.py",
    "test_own_env_workers.py",
    "test_benchmarks.py",
    "test_gpu_check.py",
    "test_reliability.py",
    "test_own_env_guide.py",
    "test_four_devices.py",
    "test_train_e2e.py",
    "test_anakin_agents.py",
    "test_anakin_games.py",
    "test_anakin_rainbow.py",
    "test_learning_harness.py",
    "test_two_agents.py",
    "test_anakin.py",
    "test_own_games.py",
    "test_rainbow_agent.py",
    "test_q_ops.py",
    "test_r2d2.py",
    "test_rainbow_faults.py",
)


# The suite's tiers (`docs/development/tests.md`), each a marker: `-m ops` the RL maths and
# losses alone (seconds), `-m parts` the pieces one at a time (data structures, networks, envs,
# actors, checkpoints, config), `-m runs` whole training runs (the rest: every file that starts
# a run, in process or as `scripts/train.py`). `test_tiers.py` holds the two short lists to it.
OPS = (
    "test_distributions.py",
    "test_gae.py",
    "test_impala_loss.py",
    "test_intrinsic.py",
    "test_q_heads.py",
    "test_q_ops.py",
    "test_rainbow_parts.py",
    "test_running_stats.py",
    "test_time_unroll.py",
    "test_vtrace.py",
)
PARTS = (
    "test_action_masks.py",
    "test_actor.py",
    "test_agents_axis.py",
    "test_benchmark_stages.py",
    "test_checkpoint.py",
    "test_data_poll.py",
    "test_device_replay.py",
    "test_inference_server.py",
    "test_jax_envs.py",
    "test_jax_games.py",
    "test_lanes.py",
    "test_layout.py",
    "test_learning_statistics.py",
    "test_multiprocess_agents.py",
    "test_networks.py",
    "test_opponent_pool.py",
    "test_prioritized_replay.py",
    "test_process_stats.py",
    "test_rainbow_agent.py",
    "test_readme.py",
    "test_replay.py",
    "test_results_docs.py",
    "test_seats.py",
    "test_segments.py",
    "test_sum_tree.py",
    "test_tiers.py",
    "test_unread_fields.py",
)


def tier(filename: str) -> str:
    """The tier of test file `filename` (its base name)."""
    return "ops" if filename in OPS else "parts" if filename in PARTS else "runs"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list) -> None:
    """Files in `LONGEST_FIRST` order, then the rest as collected; tests in a file keep their
    order (a stable sort)."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(os.path.basename(str(item.fspath)), len(rank)))
    for item in items:
        item.add_marker(tier(os.path.basename(str(item.fspath))))


@pytest.fixture(autouse=True)
def _xla_level(request: pytest.FixtureRequest):
    """A test marked `optimised` compiles its programs at XLA's default level, not the
    suite's 0: its time goes into running them (`xla_level.py`)."""
    if request.node.get_closest_marker("optimised") is None:
        yield
        return
    from xla_level import optimised

    with optimised():
        yield


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """A pytest-xdist worker leaves as soon as its results are in: it reported its last one at
    session end (`workerfinished`), and tearing down its heap afterwards (pytest's five
    garbage collections over a few million objects, JAX's cache clearing, the interpreter's
    exit) took 6-7 s at the end of every suite while the controller waited for it. What that
    skips: pytest's last sweep for exceptions ignored in `__del__` (it still reports those
    during the run)."""
    if not hasattr(config, "workerinput"):  # xdist's own mark of a worker (not inherited)
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """After a file's last test (its fixtures torn down and released): its garbage collected,
    and what outlives it frozen (`gc.freeze`: JAX's caches of traced and compiled programs,
    mostly), so later collections do not walk it again. A worker's heap grows past a million
    objects and every full collection walked all of them: over a whole suite, 19 s of full
    collections in the two workers, 8 s with this (the same peak memory)."""
    yield
    if nextitem is None or nextitem.path != item.path:
        gc.collect()
        gc.freeze()
