"""The persistent compilation cache a run uses by default, how it is moved or turned off, and
the compile totals a run logs (`jaxrl_dist/compilation.py`). Each cache case is a fresh
process: JAX reads the setting once, at its first compile."""

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest

from jaxrl_dist.compilation import CompileTotals, default_cache_dir

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBE = (
    "import jax, jax.numpy as jnp\n"
    "from jaxrl_dist.compilation import use_compilation_cache\n"
    "print(use_compilation_cache())\n"
    "def f(x):\n"
    "    for i in range(40):  # compiles for over 0.05 s: a program worth keeping\n"
    "        x = jnp.tanh(x @ x + i) * jnp.cos(x)\n"
    "    return x.sum()\n"
    "jax.jit(f)(jnp.ones((64, 64))).block_until_ready()\n"
    "print(jax.config.jax_persistent_cache_min_compile_time_secs)\n"
)


def _probe(tmp_path, **env) -> list[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("JAX")}
    base.pop("JAXRL_DIST_COMPILATION_CACHE", None)
    proc = subprocess.run(
        [sys.executable, "-c", PROBE],
        env={**base, "HOME": str(tmp_path / "home"), **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.split()


def test_the_per_user_directory_is_under_xdg_cache_home(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_cache_dir() == str(tmp_path / "jaxrl_dist" / "jax")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_cache_dir().endswith(os.path.join(".cache", "jaxrl_dist", "jax"))


def _entries(path) -> list[str]:
    return [n for n in os.listdir(path) if n.startswith("jit_")] if os.path.isdir(path) else []


@pytest.mark.parametrize("where", ["default", "moved", "jax_wins", "off"])
def test_the_cache_is_on_by_default_and_can_be_moved_or_turned_off(tmp_path, where):
    default = tmp_path / "xdg" / "jaxrl_dist" / "jax"
    ours, jaxs = tmp_path / "ours", tmp_path / "jaxs"
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    expected = {"default": default, "moved": ours, "jax_wins": jaxs, "off": None}[where]
    if where in ("moved", "jax_wins"):
        env["JAXRL_DIST_COMPILATION_CACHE"] = str(ours)
    if where == "jax_wins":  # with JAX's own variables, JAX's own rules
        env["JAX_COMPILATION_CACHE_DIR"] = str(jaxs)
        env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    if where == "off":
        env["JAXRL_DIST_COMPILATION_CACHE"] = "off"
    chosen, min_compile_s = _probe(tmp_path, **env)
    assert chosen == str(expected)
    for path in (default, ours, jaxs):  # the compiled program lands where chosen, only there
        assert bool(_entries(path)) == (path == expected), path
    # Ours keeps programs JAX's 1 s default would drop; JAX's own variables keep JAX's rules.
    assert float(min_compile_s) == {"default": 0.05, "moved": 0.05, "jax_wins": 0, "off": 1}[where]


def test_compile_totals_count_this_process_compiles():
    CompileTotals.listen()
    CompileTotals.listen()  # one listener per process, however often asked
    x = jax.block_until_ready(jnp.ones((7, 5)))
    start = CompileTotals.snapshot()
    jax.jit(lambda x: jnp.cos(x) * 3.25 + 0.5)(x).block_until_ready()
    grew = CompileTotals.since(start)
    assert grew["compiles"] == 1 and grew["backend_s"] > 0 and grew["trace_s"] > 0
    assert set(grew) == {
        "trace_s",
        "lower_s",
        "backend_s",
        "compiles",
        "cache_hits",
        "cache_misses",
    }
