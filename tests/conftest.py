"""Suite-wide set-up: JAX's persistent compilation cache for every run the tests start.

Most of the suite's time is spent in short training runs (in this process and in subprocesses),
each compiling the same few programs (the act step, the update, the evaluator) again. With the
cache, a program compiled once is read back from disk by every later run that builds the same
one, here, in the other pytest-xdist worker and in child processes (they inherit these
variables). The cache lives in the checkout (`.jax_cache/`, ignored by git): a fresh clone
starts cold, so CI measures a cold start; set JAX_COMPILATION_CACHE_DIR to put it elsewhere.
"""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Before anything imports jax: jax reads these when it is first imported.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(ROOT, ".jax_cache"))
# Cache every program, however quick to compile: the suite's programs are small.
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
