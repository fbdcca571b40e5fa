"""XLA's optimisation level for one test's programs.

The suite compiles at level 0 (`conftest.py`): most of its programs run for well under a
second, and level 0 compiles them about a third faster. A test whose time goes into running
its programs (R2D2's claim: recurrent burn-in and sequence updates; Rainbow's Atari
convolutions) pays for that instead: R2D2's learning claim took 31.7 s at level 0 and 24.1 s at
level 2, XLA's default (`-n 0`, back to back), and 47 s against 32 s in two whole suites. Such
a test is marked `@pytest.mark.optimised`: every program compiled while it runs (in this
process, on any thread) gets level 2; a subprocess it starts takes `OPTIMISED` (below) in
its environment. The ops and their precision are the same, not always the last bit (at level
2 LLVM may fuse a multiply and an add: `test_time_unroll.py`'s rolled and unrolled V-trace then
differ), so a marked test compares no result with one compiled at the suite's level. A
program's level is part of its compilation-cache key: the two never share an entry.

The level is set on the compile options JAX builds for each program (where JAX's own
`jax_disable_most_optimizations` sets level 0): `jax._src.compiler.get_compile_options` is
wrapped once. That function is JAX's, not public: where a JAX lacks it, the marked tests would
run at the suite's level (slower, not wrong), and `test_tiers.py` fails there.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

OPTIMISED_LEVEL = 2  # XLA's default
_level: list[int] = []  # the level in force: set while a marked test runs, else empty

# A subprocess's environment for the same (a `scripts/train.py` run whose convolutions level 0
# slows down more than it saves in compiling: PPO's Nature CNN about 3x): the suite's other
# flags stay (the LLVM IR fusion emitter: PPO Atari :quick 7.4 s -> 6.2 s).
_SUITE_FLAGS = os.environ.get("XLA_FLAGS", "").split()
OPTIMISED = {
    "XLA_FLAGS": " ".join(
        [f for f in _SUITE_FLAGS if not f.startswith("--xla_backend_optimization_level")]
        + [f"--xla_backend_optimization_level={OPTIMISED_LEVEL}"]
    )
}


def wrap_compile_options() -> bool:
    """Wraps JAX's compile options once, so they carry the level in force; False where this
    JAX has no `get_compile_options` to wrap."""
    from jax._src import compiler

    original = getattr(compiler, "get_compile_options", None)
    if original is None:
        return False
    if getattr(original, "sets_the_tests_level", False):
        return True

    def get_compile_options(*args, **kwargs):
        options = original(*args, **kwargs)
        if _level:
            debug = options.executable_build_options.debug_options
            debug.xla_backend_optimization_level = _level[-1]
        return options

    get_compile_options.sets_the_tests_level = True
    compiler.get_compile_options = get_compile_options
    return True


@contextlib.contextmanager
def optimised(level: int = OPTIMISED_LEVEL) -> Iterator[bool]:
    """Every program compiled inside compiles at `level`; yields whether it could be set."""
    wrapped = wrap_compile_options()
    _level.append(level)
    try:
        yield wrapped
    finally:
        _level.pop()
