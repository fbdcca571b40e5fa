"""`--help_config`: every config field with its type, default, the config file's value and a
one-line description.

Descriptions are read from the dataclasses' own source, so they cannot drift from the code: a
field's trailing comment, else the comment block above it, else its entry in the class
docstring's attribute list (`name: text`).
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import typing
from typing import Any

from jaxrl_dist.config.engine_sections import ENGINE_SECTIONS
from jaxrl_dist.config.train import SECTIONS, TrainConfig

_FIELD = re.compile(r"^(\s+)(\w+)\s*:\s*[^=#]+(?:=.*?)?(?:#\s*(.*))?$")
_DOC_ENTRY = re.compile(r"^\s+(\w+(?:,\s*\w+)*)\s*:\s+(\S.*)$")


def _first_sentence(text: str) -> str:
    text = " ".join(text.split())
    match = re.match(r"(.+?(?<!e\.g)(?<!i\.e)\.)(\s|$)", text)
    return (match.group(1) if match else text).rstrip(".")


def _doc_entries(cls: type) -> dict[str, str]:
    """`name: text` entries of the class docstring (Google style, continuation lines joined)."""
    entries, current = {}, None
    for line in (inspect.getdoc(cls) or "").splitlines():
        match = _DOC_ENTRY.match(line)
        if match:
            current = [m.strip() for m in match.group(1).split(",")]
            for name in current:
                entries[name] = match.group(2)
        elif current and line.startswith("    ") and line.strip():
            for name in current:
                entries[name] += " " + line.strip()
        else:
            current = None
    return entries


def field_descriptions(cls: type) -> dict[str, str]:
    """{field: one-line description} for a config dataclass (and the classes it extends)."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        out.update({k: _first_sentence(v) for k, v in _doc_entries(klass).items()})
        try:
            lines = inspect.getsource(klass).splitlines()
        except (OSError, TypeError):
            continue
        comments: list[str] = []
        for line in lines[1:]:
            stripped = line.strip()
            if stripped.startswith("#"):
                comments.append(stripped.lstrip("#").strip())
                continue
            match = _FIELD.match(line)
            if match and match.group(2) in {f.name for f in dataclasses.fields(klass)}:
                text = match.group(3) or " ".join(comments)
                if text:
                    out[match.group(2)] = _first_sentence(text)
            comments = []
    return out


def _type_name(hint: Any) -> str:
    text = hint if isinstance(hint, str) else getattr(hint, "__name__", repr(hint))
    return str(text).replace("typing.", "")


def _default(field: dataclasses.Field) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return "(required)"


def describe(cls: type, prefix: str, values: Any = None) -> list[tuple[str, str, str, str, str]]:
    """(name, type, default, value in this config, description) of every field of `cls`;
    nested sections are listed field by field under their prefix."""
    hints = typing.get_type_hints(cls)
    notes = field_descriptions(cls)
    rows = []
    for field in dataclasses.fields(cls):
        value = getattr(values, field.name) if values is not None else None
        if cls is TrainConfig and (field.name in SECTIONS or field.name == "algo"):
            continue  # listed by `help_text` under their own heading
        kind = field.type if isinstance(field.type, str) else hints[field.name]
        if dataclasses.is_dataclass(hints[field.name]):  # a section inside a section
            rows += describe(hints[field.name], f"{prefix}{field.name}.", value)
            continue
        default = _default(field)
        rows.append(
            (
                f"{prefix}{field.name}",
                _type_name(kind),
                repr(default),
                "" if value is None or value == default else repr(value),
                notes.get(field.name, ""),
            )
        )
    return rows


def _section_title(name: str) -> str:
    if name in ENGINE_SECTIONS:
        return f"{name} (read by config.runtime={name!r} only; refused on another runtime)"
    return name


def help_text(config: TrainConfig) -> str:
    """Every field of `config` (a loaded config: its file's values shown where they differ
    from the defaults): the run's fields, each section's (the engines' own, `sebulba` and
    `anakin`, say which runtime reads them), then the algorithm's."""
    groups = [("run", TrainConfig, "", config)]
    groups += [
        (_section_title(name), cls, f"{name}.", getattr(config, name))
        for name, cls in SECTIONS.items()
    ]
    algo_cls = type(config.algo)
    groups.append(
        (f"algo ({config.algorithm}: {algo_cls.__name__})", algo_cls, "algo.", config.algo)
    )
    out = [
        "Config fields: --config.NAME=VALUE sets one (dict fields: --config.NAME.KEY=VALUE).",
        "Columns: name, type, default, [value in this config file], description.",
    ]
    for title, cls, prefix, values in groups:
        out.append(f"\n{title}:")
        for name, kind, default, value, note in describe(cls, prefix, values):
            here = f" [this config: {value}]" if value else ""
            out.append(f"  {name} ({kind}) = {default}{here}\n      {note}")
    return "\n".join(out)
