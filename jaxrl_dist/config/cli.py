"""Command-line parsing for `scripts/train.py`: `--config FILE[:variant]`, `--config.x=v`, ...

Config errors and bad flags print one line and exit with status 2 before anything is written.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re

from jaxrl_dist import agents
from jaxrl_dist.config import ConfigError, TrainConfig, apply_overrides, build_config
from jaxrl_dist.errors import OneLineArgumentParser, UsageError
from jaxrl_dist.learning.distributed import LaunchSpec

EXIT_CONFIG_ERROR = 2
EXIT_INTERRUPTED = 130  # the shell's code for a death by SIGINT


def load_config_file(spec: str) -> dict:
    """Runs `get_config(variant)` from `path[:variant]` and returns a plain nested dict."""
    path, _, variant = spec.partition(":")
    if not os.path.isfile(path):
        raise ConfigError(
            f"--config {path!r}: no such file; give a path like configs/impala_cartpole.py"
        )
    module_spec = importlib.util.spec_from_file_location("_jaxrl_dist_config", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    if not hasattr(module, "get_config"):
        raise ConfigError(f"--config {path!r} defines no get_config(variant) function")
    try:
        config = module.get_config(variant or None)
    except ValueError as e:
        raise ConfigError(f"--config {spec!r}: {e}") from None
    return config.to_dict() if hasattr(config, "to_dict") else dict(config)


def load_config(spec: str, **overrides: object) -> TrainConfig:
    """The config of `path[:variant]` with overrides, for Python code: `load_config(
    "configs/impala_cartpole.py:quick", total_env_steps=50_000, **{"algo.learning_rate": 3e-4})`.
    Values are checked and typed exactly as `--config.field=value` would be (ConfigError)."""
    return _build(load_config_file(spec), {k: str(v) for k, v in overrides.items()})


def _build(raw: dict, overrides: dict[str, str]) -> TrainConfig:
    name = overrides.get("algorithm", raw.get("algorithm", "impala"))
    algo_cls = algo_config_of(name, "config.algorithm")
    raw = apply_overrides(raw, overrides, algo_cls, algo_config_of)
    return build_config(raw, algo_cls, algo_config_of)


def algo_config_of(name: str, field: str = "config.agents.NAME.algorithm") -> type:
    """The config class of registered algorithm `name`; ConfigError naming the choices."""
    if name not in agents.REGISTRY:
        raise ConfigError(
            f"{field}={name!r} is not registered; choose one of {sorted(agents.REGISTRY)}"
        )
    return agents.get(name).config_cls


def parse_args(argv: list[str]) -> tuple[TrainConfig, argparse.Namespace]:
    """Splits `--config.field=value` overrides from the other flags and builds the config.
    A bad flag raises ConfigError with one line, as a bad config value does."""
    overrides, rest = {}, []
    for arg in argv:
        if arg.startswith("--config."):
            key, eq, value = arg[len("--config.") :].partition("=")
            if not eq:
                raise ConfigError(f"{arg}: write overrides as --config.{key}=VALUE")
            overrides[key] = value
        else:
            rest.append(arg)
    parser = OneLineArgumentParser(prog="train.py", description="Train with jaxrl_dist.")
    parser.add_argument("--config", required=True, help="config file, e.g. configs/x.py:quick")
    parser.add_argument(
        "--workdir",
        required="--help_config" not in rest,
        help="run directory (checkpoints, logs); not needed with --help_config",
    )
    parser.add_argument(
        "--help_config",
        action="store_true",
        help="print every config field (type, default, this config's value, description)",
    )
    parser.add_argument("--resume", action="store_true", help="continue the run in --workdir")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    multi = parser.add_argument_group(
        "multi-process (jax.distributed; see the README's multi-host section)"
    )
    multi.add_argument("--coordinator_address", help="HOST:PORT of process 0")
    multi.add_argument("--num_processes", type=int, help="processes in the run")
    multi.add_argument("--process_id", type=int, help="this process's index, 0..N-1")
    multi.add_argument(
        "--distributed", action="store_true", help="let JAX detect the cluster (SLURM, TPU pod)"
    )
    multi.add_argument(
        "--heartbeat_timeout_s",
        type=int,
        default=30,
        help="a process silent this long is dead: the others stop",
    )
    try:
        args = parser.parse_args(rest)
    except UsageError as e:  # a ConfigError, which main and the benchmarks' callers catch
        raise ConfigError(str(e)) from None
    launch = launch_spec(args)
    problem = launch.problem()
    if problem:
        raise ConfigError(problem)
    return _build(load_config_file(args.config), overrides), args


def launch_spec(args: argparse.Namespace) -> LaunchSpec:
    return LaunchSpec(
        coordinator_address=args.coordinator_address,
        num_processes=args.num_processes,
        process_id=args.process_id,
        auto=args.distributed,
        heartbeat_timeout_s=args.heartbeat_timeout_s,
    )


_FIELD_AT_START = re.compile(r"config\.([\w.]+)(?:=| names| is not)")
_FIELD_IN_FIX = re.compile(r"(?<![-\w.])config\.(?=[\w.]+(?:=| a multiple| to ))")


def command_line_message(error: ConfigError) -> str:
    """The library's one-line error in the terms of this command line: a field it names in its
    fix becomes the override flag (`set config.x=1` -> `set --config.x=1`), and an error about a
    field that says no fix ends with `; fix it with --config.<field>=...`."""
    text = str(error)
    head, sep, fix = text.partition("; ")
    if sep:
        return f"{head}; {_FIELD_IN_FIX.sub('--config.', fix)}"
    field = _FIELD_AT_START.match(text)
    return f"{text}; fix it with --config.{field.group(1)}=..." if field else text
