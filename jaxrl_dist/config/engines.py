"""The engines `config.runtime` can name, by import path (`run/engine.py` defines what an engine
is): the config checks a name against this table without importing any engine, and a run imports
only its own."""

from __future__ import annotations

import importlib
from typing import Any

ENGINES: dict[str, Any] = {
    "sebulba": "jaxrl_dist.sebulba.engine:SebulbaEngine",
    "anakin": "jaxrl_dist.anakin.engine:AnakinEngine",
}


def get_engine(name: str) -> Any:
    """The `Engine` class `config.runtime=name` runs on (imported on first use)."""
    engine = ENGINES[name]
    if isinstance(engine, str):
        module, _, cls = engine.partition(":")
        engine = ENGINES[name] = getattr(importlib.import_module(module), cls)
    return engine


def register_engine(name: str, engine: Any) -> None:
    """Makes `config.runtime=name` run on `engine` (an `Engine` subclass, from research code)."""
    ENGINES[name] = engine
