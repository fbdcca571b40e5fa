"""Old flat field names and where they live now (`config.sebulba`, `config.anakin`).

The old names keep working for one release: a config file, a `--config.NAME=VALUE` override or
`load_config(spec, NAME=...)` that gives one is read as the new name, with a one-line hint on
stderr (once per name in a process). A saved run config (`config.json`, a checkpoint's meta)
goes through the same map without the hint: a resume or an evaluation of an older run reads it.
"""

from __future__ import annotations

import sys
from typing import Any

from jaxrl_dist.config.engine_sections import ENGINE_SECTIONS
from jaxrl_dist.config.errors import ConfigError

# old top-level name -> its section (the field keeps its name inside the section).
MOVED = {
    name: section for section, cls in ENGINE_SECTIONS.items() for name in cls.__dataclass_fields__
}
_hinted: set[str] = set()


def new_path(path: str, tell: bool = True) -> str | None:
    """The current dotted name of an old one (`"inference.client"` ->
    `"sebulba.inference.client"`, with the hint when `tell`), or None when `path` was not
    moved."""
    head = path.split(".", 1)[0]
    section = MOVED.get(head)
    if section is None:
        return None
    if tell:
        hint(head, f"{section}.{head}")
    return f"{section}.{path}"


def hint(old: str, new: str) -> None:
    """Prints the one-line hint for an old name, once per process."""
    if old in _hinted:
        return
    _hinted.add(old)
    print(
        f"config.{old} is now config.{new}; the old name works until the next release: "
        f"write config.{new}",
        file=sys.stderr,
    )


def move_flat_fields(raw: dict[str, Any], tell: bool = True) -> dict[str, Any]:
    """`raw` (a config as a nested dict) with its old top-level names moved into their
    sections (a hint for each when `tell`); ConfigError when a name is given both ways."""
    raw = dict(raw)
    for old in [name for name in raw if name in MOVED]:
        section = MOVED[old]
        value = raw.pop(old)
        # A saved config from before the sections lists every field: take them silently.
        inner = dict(raw.get(section) or {})
        if old in inner and inner[old] != value:
            raise ConfigError(
                f"config.{old} and config.{section}.{old} are both given; keep "
                f"config.{section}.{old} alone"
            )
        if old == "inference" and isinstance(value, dict):
            value = {**value, **dict(inner.get(old) or {})}
        inner[old] = value
        raw[section] = inner
        if tell:
            hint(old, f"{section}.{old}")
    return raw
