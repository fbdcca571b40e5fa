"""Where a suite's compile time goes: the census `compile_hook/sitecustomize.py` wrote, added up.

    python benchmarks/suite_time.py --compile-census     # the whole suite, with the census

JAX reports, per process: tracing a function to a jaxpr, lowering it to an MLIR module (done for
a persistent-cache hit too: the cache's key is the module), and the backend compile (a miss) or
the read back (a hit: JAX reports it just before that compile's duration, on the same thread,
which the hook records). Tracing nests (a jitted function traced inside another reports both), so
its seconds overstate; lowering and backend seconds do not. A "program" is a backend compile of
over `BIG_S` seconds; the rest are mostly single operations run outside `jit`.
"""

from __future__ import annotations

import collections
import glob
import json
import os

BIG_S = 0.05  # a compile over this is a program, not one eager operation
PREFIX = "/jax/core/compile/"


def _records(directory: str):
    for path in sorted(glob.glob(os.path.join(directory, "*.jsonl"))):
        with open(path) as f:
            lines = f.readlines()
        yield [json.loads(line) for line in lines if line.endswith("\n")]


def _file_of(record: dict) -> str:
    return os.path.basename((record.get("test") or "outside a test").split("::")[0])


def census(directory: str, top: int = 20) -> dict:
    """The totals of every process's records under `directory`, by function and by test file."""
    total: collections.Counter = collections.Counter()
    by_fun = collections.defaultdict(collections.Counter)
    by_file = collections.defaultdict(collections.Counter)
    for records in _records(directory):
        total["processes"] += 1
        hit: set = set()  # the threads whose next backend compile is a cache hit's
        for r in records:
            thread = r.get("thread")
            event = r["event"]
            if event == "exit":
                total["exited_cpu_s"] += r["cpu_s"]
            elif event.endswith("/cache_hits"):
                hit.add(thread)
            elif event == PREFIX + "jaxpr_trace_duration":
                total["trace_s"] += r["seconds"]
                by_file[_file_of(r)]["trace_s"] += r["seconds"]
            elif event == PREFIX + "jaxpr_to_mlir_module_duration":
                total["lower_s"] += r["seconds"]
                by_fun[r["fun"]]["lower_s"] += r["seconds"]
                by_file[_file_of(r)]["lower_s"] += r["seconds"]
            elif event == PREFIX + "backend_compile_duration":
                kind = "hit" if thread in hit else ("program" if r["seconds"] > BIG_S else "small")
                hit.discard(thread)
                for counter in (total, by_fun[r["fun"]], by_file[_file_of(r)]):
                    counter[f"{kind}_n"] += 1
                    counter[f"{kind}_s"] += r["seconds"]

    def rounded(counter: collections.Counter) -> dict:
        return {k: round(v, 1) if isinstance(v, float) else v for k, v in sorted(counter.items())}

    def heaviest(table: dict) -> dict:
        cost = lambda c: c["program_s"] + c["small_s"] + c["lower_s"]  # noqa: E731
        names = sorted(table, key=lambda name: -cost(table[name]))[:top]
        return {name: rounded(table[name]) for name in names}

    return {
        "totals": rounded(total),
        "by_function": heaviest(by_fun),
        "by_test_file": heaviest(by_file),
    }


def markdown(result: dict) -> str:
    """One line of totals: the census's headline."""
    t = result["totals"]
    return (
        f"Compile census ({t.get('processes', 0)} processes with JAX): tracing "
        f"{t.get('trace_s', 0):.0f} s (nested), lowering {t.get('lower_s', 0):.0f} s, backend "
        f"{t.get('program_n', 0):,} programs {t.get('program_s', 0):.0f} s, "
        f"{t.get('small_n', 0):,} small compiles {t.get('small_s', 0):.0f} s, "
        f"{t.get('hit_n', 0):,} cache hits {t.get('hit_s', 0):.0f} s.\n"
    )
