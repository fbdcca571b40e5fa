"""The parts of a network a user supplies by name (`network.torso`, `network.core`,
`network.head`): a factory imported from `MODULE:FACTORY`, or registered in this process under
a name (`register_torso`, `register_core`, `register_head`), that returns a flax linen module.

One registry per part; a shipped part's name can never be taken. A factory is looked up where
the network is built (and when a config is read, so a bad name is refused before anything is
written); what it returns is checked to be a module (`built_module`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax

from jaxrl_dist.user_code import FactoryError, load_factory


class PartError(ValueError):
    """A user's network part that cannot be built or does not fit (one line, with the fix)."""


# part ("torso" | "core" | "head") -> {name: factory}
_REGISTERED: dict[str, dict[str, Callable[[Any], nn.Module]]] = {
    "torso": {},
    "core": {},
    "head": {},
}


def register_part(
    part: str, name: str, factory: Callable[[Any], nn.Module], shipped: tuple[str, ...]
) -> None:
    """Makes `network.<part>=name` build `factory(spec)` in this process (a second registration
    of `name` replaces the first); `shipped`: the part's own names, which stay the library's."""
    if name in shipped or ":" in name or not name:
        raise ValueError(
            f"register_{part}({name!r}): the name must be new and hold no ':' (the shipped "
            f"{part}s are {shipped}; 'MODULE:FACTORY' names an importable one)"
        )
    if not callable(factory):
        raise ValueError(f"register_{part}({name!r}): the factory {factory!r} is not callable")
    _REGISTERED[part][name] = factory


def part_factory(
    part: str, name: str, shipped: tuple[str, ...], example: str
) -> Callable[[Any], nn.Module]:
    """The factory of the user's `part` called `name` (registered, or `MODULE:FACTORY`
    imported); PartError (one line) when there is none. `example`: a `MODULE:FACTORY` the
    message shows."""
    registered = _REGISTERED[part]
    if name in registered:
        return registered[name]
    if ":" in name:
        return load_factory(name, "", f"config.network.{part}", example)
    names = ", ".join(map(repr, registered)) or "none"
    raise PartError(
        f"network.{part}={name!r} is not one of {shipped} nor a {part} registered in this "
        f"process ({names}); set config.network.{part} to one of them or to "
        f"'MODULE:FACTORY', or register_{part}() it before the run"
    )


def built_module(part: str, name: str, module: Any, does: str) -> nn.Module:
    """`module`, the user's factory's answer for `network.<part>=name`, if it is a flax linen
    Module; PartError naming what came back otherwise. `does`: what the module must do."""
    if not isinstance(module, nn.Module):
        raise PartError(
            f"config.network.{part}={name!r} returned {type(module).__name__}, not a flax.linen "
            f"Module; return one that {does}"
        )
    return module


def first_line(error: BaseException) -> str:
    """`TypeName: the first line of its message`, for a one-line refusal."""
    first = (str(error).strip().splitlines() or [type(error).__name__])[0]
    return f"{type(error).__name__}: {first}"


def traced(fn: Callable[..., Any], *args: Any, fails: str, fix: str = "") -> Any:
    """`jax.eval_shape(fn, *args)` (shapes only: nothing is computed) of a network holding a
    user's part; PartError `"{fails}: {the error's first line}{fix}"` where the user's code
    fails. Ours (no factory, no module, a shape that does not fit) pass through as they are:
    one line already."""
    try:
        return jax.eval_shape(fn, *args)
    except (PartError, FactoryError):
        raise
    except Exception as e:  # noqa: BLE001  the user's module fails on these shapes
        raise PartError(f"{fails}: {first_line(e)}{fix}") from None
