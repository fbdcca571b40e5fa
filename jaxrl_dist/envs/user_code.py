"""A user's env factory named in an env id (`pettingzoo:module:factory`, `jax:module:factory`)
and the one-line reasons it cannot be loaded. Imports no JAX: a Python env's worker process
loads its factory through here."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


class FactoryError(ValueError):
    """A factory named in an env id that cannot be loaded; the message is one line with the
    fix."""


def import_problem(name: str, module: str) -> str:
    """The one line for a user's module that cannot be imported (`name`: the config field)."""
    return (
        f"{name}: cannot import module {module!r}; make it importable (pip install -e your "
        "package, or add its folder to PYTHONPATH)"
    )


def load_factory(env_id: str, prefix: str) -> Callable[..., Any]:
    """`MODULE.FACTORY` of `env_id` = `{prefix}MODULE:FACTORY`, imported; FactoryError."""
    name = f"config.env_id={env_id!r}"
    parts = env_id[len(prefix) :].split(":")
    if len(parts) != 2 or not all(parts):
        raise FactoryError(f"{name}: write {prefix}MODULE:FACTORY, e.g. {prefix}my_pkg.envs:make")
    module_name, attr = parts
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        raise FactoryError(import_problem(name, e.name or module_name)) from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise FactoryError(f"{name}: module {module_name} has no callable {attr!r}")
    return factory
