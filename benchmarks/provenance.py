"""Where a results file came from: the commit, whether the tree differed from it, the resolved
config and the machine. Every benchmark that writes a result calls `capture` once, before it
measures anything, and stores what it returns under the result's `provenance` key:

    parser = argparse.ArgumentParser(...)
    provenance.add_argument(parser)                       # --allow-dirty
    args = parser.parse_args()
    origin = provenance.capture(args.allow_dirty, config)  # exits 2 on a dirty tree
    ...
    result["provenance"] = origin

A tree with changes to tracked files, or untracked files git does not ignore, is *dirty*: the
commit alone no longer names the code that ran, so `capture` refuses it in one line (exit 2)
unless `--allow-dirty` says so; then the result keeps the SHA-256 of the diff (`git diff HEAD`,
the command is recorded beside it) and each untracked file's SHA-256. Results files themselves
(`benchmarks/results/`) are data, not code: changing them does not make a tree dirty, so one
sweep's files never refuse the next. A copy of the tree without `.git` (an archive, a machine
that got the files only) cannot name its commit and is refused the same way.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from typing import Any, NoReturn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOT_CODE = ":(exclude)benchmarks/results"  # a pathspec: what never makes a tree dirty
DIFF_COMMAND = ("git", "diff", "HEAD", "--binary", "--", ".", NOT_CODE)
PACKAGES = ("jax", "jaxlib", "flax", "optax", "envpool", "numpy", "gymnasium")


def add_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--allow-dirty",
        action="store_true",
        help="measure a tree with uncommitted changes (or without .git); the result keeps the "
        "diff's SHA-256",
    )


def capture(
    allow_dirty: bool,
    config: Any = None,
    *,
    devices: bool = True,
    root: str = ROOT,
) -> dict[str, Any]:
    """The result's `provenance`: `source` (commit, dirty flag, diff hash), `config` (each
    `TrainConfig` given, as train.py resolved it, overrides included: `config.to_dict()` made
    JSON-able; a dict of them by name; None), `machine` (CPU model, cores, accelerator, Python
    and package versions; `devices=False` leaves JAX unstarted), the command line and the date.
    A dirty tree without `allow_dirty` prints one line and exits 2."""
    source = source_state(root)
    if source["dirty"] is not False and not allow_dirty:
        _refuse(source, root)
    return {
        "source": source,
        "config": _resolved(config),
        "machine": machine(devices),
        "argv": list(sys.argv),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
    }


def source_state(root: str = ROOT) -> dict[str, Any]:
    """`{"git_commit", "dirty", "changed", "untracked", "diff_sha256", "diff_command"}` of the
    checkout at `root`; outside a git checkout the commit and dirty flag are None."""
    commit = _git(root, "rev-parse", "HEAD")
    if commit is None:
        return {"git_commit": None, "dirty": None, "why": f"{root} is not a git checkout"}
    changed = _git(root, "diff", "HEAD", "--name-only", "--", ".", NOT_CODE).splitlines()
    others = _git(root, "ls-files", "--others", "--exclude-standard", "--", ".", NOT_CODE)
    untracked = [
        {"path": path, "sha256": _file_sha256(os.path.join(root, path))}
        for path in others.splitlines()
    ]
    dirty = bool(changed or untracked)
    diff = _git_bytes(root, *DIFF_COMMAND[1:]) if changed else b""
    return {
        "git_commit": commit.strip(),
        "dirty": dirty,
        "changed": changed,
        "untracked": untracked,
        "diff_sha256": hashlib.sha256(diff).hexdigest() if changed else None,
        "diff_command": " ".join(DIFF_COMMAND[:-1] + (f"'{NOT_CODE}'",)),
    }


def machine(devices: bool = True) -> dict[str, Any]:
    """The CPU (model, cores the process may use, all cores), the accelerator (JAX's first
    device and count; with `devices=False`, nvidia-smi's name, so JAX stays unstarted), the
    OS, Python and the versions of the packages that set the speed."""
    found = {
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": {p: _version(p) for p in PACKAGES},
    }
    if devices:
        import jax

        first = jax.devices()[0]
        found.update(
            device=f"{first.platform}:{first.device_kind}", device_count=jax.device_count()
        )
    else:
        found["device"] = nvidia_smi_name()
    return found


def cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _resolved(config: Any) -> Any:
    if config is None:
        return None
    from jaxrl_dist.config import jsonable

    if isinstance(config, dict):
        return {name: jsonable(c.to_dict()) for name, c in config.items()}
    return jsonable(config.to_dict())


def _refuse(source: dict[str, Any], root: str) -> NoReturn:
    if source["git_commit"] is None:
        why = f"{root} is not a git checkout, so the result could not name its commit"
    else:
        paths = source["changed"] + [u["path"] for u in source["untracked"]]
        shown = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
        why = f"the tree differs from {source['git_commit'][:7]} ({shown})"
    print(
        f"error: {why}: commit first, or pass --allow-dirty to measure it anyway (the result "
        "then keeps the diff's SHA-256)",
        file=sys.stderr,
    )
    sys.exit(2)


def short_commit(root: str = ROOT) -> str | None:
    """The checkout's HEAD as 7 hex digits, or None outside a git checkout."""
    out = _git(root, "rev-parse", "--short=7", "HEAD")
    return (out or "").strip() or None


def _git_bytes(root: str, *args: str) -> bytes | None:
    try:
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def _git(root: str, *args: str) -> str | None:
    out = _git_bytes(root, *args)
    return None if out is None else out.decode(errors="replace")


def _file_sha256(path: str) -> str | None:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    except OSError:  # a dangling link, a file gone meanwhile
        return None
    return digest.hexdigest()


def nvidia_smi_name() -> str:
    """The accelerator's name as nvidia-smi gives it ("cpu" without one), without starting JAX
    (a benchmark's parts may need the whole device)."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 else "cpu"
    except (OSError, IndexError, subprocess.SubprocessError):
        return "cpu"


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None
