"""The config's error type: one line naming the field and the fix."""

from __future__ import annotations

import typing
from typing import Any


class ConfigError(ValueError):
    """A bad configuration value; the message is one line naming the field and the fix."""


def fail(field: str, value: Any, why: str) -> typing.NoReturn:
    raise ConfigError(f"config.{field}={value!r} {why}")
