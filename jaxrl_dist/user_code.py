"""A user's factory named in a config string (`MODULE:FACTORY`: an env id's
`pettingzoo:module:factory` and `jax:module:factory`, a network's `network.torso`) and the
one-line reasons it cannot be loaded. Imports no JAX: a Python env's worker process loads its
factory through here.

A module that cannot be imported is told apart by who is missing: the module the env id names
(make it importable), or a module it imports, which the hint names with the package that
provides it (`missing_module_hint`): `pettingzoo[classic]` where PettingZoo's classic games
import `pygame`, as PettingZoo's own requirements say."""

from __future__ import annotations

import importlib
import importlib.metadata
import re
from collections.abc import Callable
from typing import Any

# Modules whose pip package has another name (the common ones among envs' dependencies);
# any other module is assumed to be installed under its own name.
PIP_NAMES = {
    "pygame": ("pygame-ce", "pygame"),
    "cv2": ("opencv-python", "opencv-python-headless"),
    "PIL": ("pillow",),
    "yaml": ("pyyaml",),
    "sklearn": ("scikit-learn",),
    "skimage": ("scikit-image",),
    "Box2D": ("box2d-py", "box2d"),
    "google.protobuf": ("protobuf",),
}
_EXTRA = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


class FactoryError(ValueError):
    """A factory named in a config string that cannot be loaded; the message is one line with
    the fix."""


def _normal(name: str) -> str:
    """A package or extra name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _importer(error: ModuleNotFoundError) -> str | None:
    """The module whose `import` failed: the innermost frame of the traceback that is not
    importlib's (its bootstrap's frames are hidden already; `import_module`'s is not)."""
    tb, name = error.__traceback__, None
    while tb is not None:
        module = tb.tb_frame.f_globals.get("__name__") or ""
        if module.split(".")[0] != "importlib":
            name = module or name
        tb = tb.tb_next
    return name


def _distribution(module: str) -> str | None:
    """The installed distribution that holds top-level package `module`, or None."""
    top = module.split(".")[0]
    try:
        return importlib.metadata.distribution(top).metadata["Name"]
    except importlib.metadata.PackageNotFoundError:
        pass
    names = importlib.metadata.packages_distributions().get(top)
    return names[0] if names else None


def _extras(dist: str, packages: tuple[str, ...]) -> list[str] | None:
    """The extras of `dist` that require one of `packages` ([] for a plain requirement), or
    None if `dist` does not require any."""
    wanted = {_normal(p) for p in packages}
    found = None
    for requirement in importlib.metadata.requires(dist) or ():
        name = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
        if name is None or _normal(name.group(1)) not in wanted:
            continue
        found = found if found is not None else []
        found += [e for e in _EXTRA.findall(requirement) if e not in found]
    return found


def _install_hint(missing: str, importer: str | None) -> str:
    """`pip install ...` for the module `missing`, imported by module `importer`."""
    top = missing.split(".")[0]
    packages = PIP_NAMES.get(missing) or PIP_NAMES.get(top) or (top,)
    dist = _distribution(importer) if importer else None
    if dist is None or _normal(dist) in {_normal(p) for p in packages}:
        return f"pip install {packages[0]}"
    extras = _extras(dist, packages)
    if extras is None:  # not a requirement of the importer's package: the user installs it
        return f"pip install {packages[0]} ({dist} imports it)"
    if not extras:  # a requirement it declares: its install is broken
        return f"pip install {packages[0]} (a requirement of {dist}; reinstall {dist})"
    # The extra named in the importer's path (pettingzoo.classic: "classic"), else every one.
    parts = {_normal(p) for p in importer.split(".")}
    chosen = [e for e in extras if _normal(e) in parts] or extras
    return " or ".join(f"pip install '{dist}[{e}]'" for e in chosen)


def missing_module_hint(error: ModuleNotFoundError, named: str) -> str:
    """What to do about `error` raised while importing the module `named` (the one an env id
    names): make `named` importable if it is the one missing, else install the package that
    provides the missing module (with the importer's extra where its requirements name one)."""
    while isinstance(error.__cause__, ModuleNotFoundError):  # re-raised (gymnasium's module:ID)
        error = error.__cause__
    missing = error.name or named
    if named == missing or named.startswith(missing + "."):
        return (
            f"cannot import module {named!r}; make it importable (pip install -e your "
            "package, or add its folder to PYTHONPATH)"
        )
    importer = _importer(error)
    try:
        hint = _install_hint(missing, importer)
    except Exception:  # noqa: BLE001  unreadable package metadata: the plain hint
        hint = f"pip install {missing.split('.')[0]}"
    via = f" (imported by {importer})" if importer and importer != "__main__" else ""
    return f"module {named!r} needs {missing!r}, which is not installed{via}; {hint}"


def import_problem(name: str, error: ModuleNotFoundError, named: str) -> str:
    """The one line for a module `named` that cannot be imported (`name`: the config field)."""
    return f"{name}: {missing_module_hint(error, named)}"


def load_factory(
    text: str, prefix: str, field: str = "config.env_id", example: str = "my_pkg.envs:make"
) -> Callable[..., Any]:
    """`MODULE.FACTORY` of `text` = `{prefix}MODULE:FACTORY` (the value of config `field`),
    imported; FactoryError."""
    name = f"{field}={text!r}"
    parts = text[len(prefix) :].split(":")
    if len(parts) != 2 or not all(parts):
        raise FactoryError(f"{name}: write {prefix}MODULE:FACTORY, e.g. {prefix}{example}")
    module_name, attr = parts
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        raise FactoryError(import_problem(name, e, module_name)) from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise FactoryError(f"{name}: module {module_name} has no callable {attr!r}")
    return factory
