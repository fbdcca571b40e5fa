"""Which fields of a frozen config dataclass are set away from their defaults: what the checks
that refuse a field nothing reads ask (`changed_field`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any


def field_default(cls_or_obj: Any, name: str) -> Any:
    """The default of dataclass field `name` (its factory's value for a mutable one)."""
    field = {f.name: f for f in dataclasses.fields(cls_or_obj)}[name]
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


def changed_field(obj: Any, names: Iterable[str] | None = None) -> tuple[str, Any, Any] | None:
    """(name, value, default) of the first of fields `names` (all of `obj`'s fields by default,
    in declaration order) whose value is not its default, or None."""
    if names is None:
        names = [f.name for f in dataclasses.fields(obj)]
    for name in names:
        value, default = getattr(obj, name), field_default(obj, name)
        if value != default:
            return name, value, default
    return None
