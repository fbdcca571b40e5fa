"""The typed run configuration and its validation.

Config files (`configs/*.py`) build an `ml_collections.ConfigDict` with `get_config(variant)`;
`apply_overrides` applies `--config.field=value` strings, parsing each value by the type the
typed dataclass declares for that field; `build_config` turns the dict into frozen dataclasses
whose `__post_init__` checks every value. Every failure is a `ConfigError` with one line that
names the field and says how to fix it; `scripts/train.py` prints it and exits 2 before anything
is written.

Modules: `train.py` (TrainConfig), `engine_sections.py` (each engine's own section:
`config.sebulba`, `config.anakin`), `sections.py` (the other nested sections), `moved.py` (old
flat names to their sections), `parsing.py` (strings and dicts to typed values), `errors.py`,
`cli.py` (config files, the command line), `describe.py` (`--help_config`).
"""

from jaxrl_dist.config.errors import ConfigError
from jaxrl_dist.config.parsing import apply_overrides, build_config, jsonable
from jaxrl_dist.config.train import (
    EVAL_MODES,
    SECTIONS,
    TrainConfig,
)
from jaxrl_dist.config.train_checks import ACTOR_LOOPS

__all__ = [
    "ACTOR_LOOPS",
    "EVAL_MODES",
    "SECTIONS",
    "ConfigError",
    "TrainConfig",
    "apply_overrides",
    "build_config",
    "jsonable",
]
