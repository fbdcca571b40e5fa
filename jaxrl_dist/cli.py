"""Command-line parsing for `scripts/train.py`: `--config FILE[:variant]`, `--config.x=v`, ...

Config errors print one line and exit with status 2 before anything is written.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys

from jaxrl_dist import algorithms
from jaxrl_dist.config import ConfigError, TrainConfig, apply_overrides, build_config

EXIT_CONFIG_ERROR = 2


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


def parse_args(argv: list[str]) -> tuple[TrainConfig, argparse.Namespace]:
    """Splits `--config.field=value` overrides from the other flags and builds the config."""
    overrides, rest = {}, []
    for arg in argv:
        if arg.startswith("--config."):
            key, eq, value = arg[len("--config.") :].partition("=")
            if not eq:
                raise ConfigError(f"{arg}: write overrides as --config.{key}=VALUE")
            overrides[key] = value
        else:
            rest.append(arg)
    parser = argparse.ArgumentParser(prog="train.py", description="Train with jaxrl_dist.")
    parser.add_argument("--config", required=True, help="config file, e.g. configs/x.py:quick")
    parser.add_argument("--workdir", required=True, help="run directory (checkpoints, logs)")
    parser.add_argument("--resume", action="store_true", help="continue the run in --workdir")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    args = parser.parse_args(rest)
    raw = load_config_file(args.config)
    name = overrides.get("algorithm", raw.get("algorithm", "impala"))
    if name not in algorithms.REGISTRY:
        raise ConfigError(
            f"config.algorithm={name!r} is not registered; "
            f"choose one of {sorted(algorithms.REGISTRY)}"
        )
    algo_cls = algorithms.get(name).config_cls
    raw = apply_overrides(raw, overrides, algo_cls)
    return build_config(raw, algo_cls), args


def main(argv: list[str] | None = None) -> int:
    from jaxrl_dist.trainer import RunError, Trainer  # heavy imports after the cheap checks

    argv = sys.argv[1:] if argv is None else argv
    try:
        config, args = parse_args(argv)
        trainer = Trainer(config, args.workdir, resume=args.resume, quiet=args.quiet)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    try:
        trainer.run()
    except RunError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0
