"""Schedules of run-time hyperparameters (`config.schedules`), built from optax schedules.

A schedule is a multiplier of a hyperparameter's run-time base value (`LearnerState.hparams`)
as a function of the update count: the value an update reads is `base * multiplier(update)`. So
a run-time change (a hook, `control.json`) moves the base and the schedule's shape stays. Fractions
(`warmup`, piecewise boundaries) are of the run's updates (`total_env_steps` over the env steps
per update), so a schedule keeps its shape when the run's length changes.

Specs are strings, `KIND` or `KIND:key=value,...`:

    constant                          1 throughout
    linear[:end=E]                    1 -> E (default 0) over the run
    cosine[:end=E]                    cosine decay 1 -> E (default 0) over the run
    any of the above with warmup=W    first 0 -> 1 linearly over the first W of the run, e.g.
                                      cosine:warmup=0.05,end=0.1 (optax's warmup-cosine)
    piecewise:F1=M1,F2=M2,...         M1 from fraction F1 of the run on, M2 from F2 on ... (1
                                      before F1), e.g. piecewise:0.5=0.1,0.75=0.01
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import optax

KINDS = ("constant", "linear", "cosine", "piecewise")


class ScheduleError(ValueError):
    """A schedule spec that cannot be read; the message is one line."""


def _number(text: str, spec: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ScheduleError(f"{spec!r}: {text!r} is not a number") from None
    if not math.isfinite(value):
        raise ScheduleError(f"{spec!r}: {text!r} is not a finite number")
    return value


def _options(spec: str, body: str) -> dict[str, float]:
    options = {}
    for part in filter(None, body.split(",")):
        key, sep, value = part.partition("=")
        if not sep:
            raise ScheduleError(f"{spec!r}: {part!r} is not key=value")
        options[key.strip()] = _number(value.strip(), spec)
    return options


def _piecewise(spec: str, options: dict[str, float], num_updates: int) -> optax.Schedule:
    """Absolute multipliers from each boundary on, as optax's cumulative scales."""
    points = sorted((_number(k, spec), v) for k, v in options.items())
    if not points or any(not 0 <= f <= 1 for f, _ in points):
        raise ScheduleError(f"{spec!r}: give boundaries as fractions of the run in [0, 1]")
    if any(m <= 0 for _, m in points):  # optax's scales are ratios of consecutive values
        raise ScheduleError(f"{spec!r}: multipliers must be > 0")
    scales, before = {}, 1.0
    for fraction, multiplier in points:
        step = int(round(fraction * num_updates))
        scales[step] = scales.get(step, 1.0) * multiplier / before
        before = multiplier
    return optax.piecewise_constant_schedule(1.0, scales)


def parse_schedule(spec: str, num_updates: int = 1) -> optax.Schedule:
    """The multiplier of a hyperparameter at an update (a jittable function of the update
    count), from `spec` (module docstring) over a run of `num_updates` updates. Raises
    ScheduleError (one line) for a spec it cannot read."""
    kind, _, body = spec.strip().partition(":")
    if kind not in KINDS:
        raise ScheduleError(f"{spec!r}: unknown kind {kind!r}; use one of {KINDS}")
    options = _options(spec, body)
    if kind == "piecewise":
        return _piecewise(spec, options, num_updates)
    allowed = {"constant": set(), "linear": {"end", "warmup"}, "cosine": {"end", "warmup"}}[kind]
    allowed |= {"warmup"}
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise ScheduleError(f"{spec!r}: {kind} takes {sorted(allowed)}, not {unknown}")
    warmup_fraction, end = options.get("warmup", 0.0), options.get("end", 0.0)
    if not 0 <= warmup_fraction < 1:
        raise ScheduleError(f"{spec!r}: warmup must be a fraction of the run in [0, 1)")
    warmup = int(round(warmup_fraction * num_updates))
    decay = max(1, num_updates - warmup)
    main = {
        "constant": lambda: optax.constant_schedule(1.0),
        "linear": lambda: optax.linear_schedule(1.0, end, decay),
        "cosine": lambda: optax.cosine_decay_schedule(1.0, decay, alpha=end),
    }[kind]()
    if not warmup:
        return main
    return optax.join_schedules([optax.linear_schedule(0.0, 1.0, warmup), main], [warmup])


def check_schedules(schedules: dict[str, str], names: tuple[str, ...]) -> str | None:
    """One line naming what is wrong with `config.schedules` for an agent whose run-time
    hyperparameters are `names`, or None."""
    for name, spec in schedules.items():
        if name not in names:
            return (
                f"config.schedules names {name!r}, which is not a run-time hyperparameter of "
                f"this algorithm; these are: {', '.join(names)}"
            )
        if not isinstance(spec, str):
            return f"config.schedules[{name!r}]={spec!r} must be a string such as 'cosine'"
        try:
            parse_schedule(spec)
        except ScheduleError as e:
            return f"config.schedules[{name!r}]: {e}"
    return None


def scheduled_hparams(
    schedules: dict[str, str], num_updates: int
) -> Callable[[dict[str, jax.Array], jax.Array], dict[str, jax.Array]]:
    """`apply(hparams, update) -> hparams` with every scheduled value multiplied by its
    schedule at `update` (jittable; the others unchanged)."""
    multipliers = {name: parse_schedule(spec, num_updates) for name, spec in schedules.items()}

    def apply(hparams: dict[str, jax.Array], update: jax.Array) -> dict[str, jax.Array]:
        out = dict(hparams)
        for name, multiplier in multipliers.items():
            out[name] = hparams[name] * jnp.asarray(multiplier(update), hparams[name].dtype)
        return out

    return apply
