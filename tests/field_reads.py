"""Test helper: which config fields a run reads (`recorded_reads`), and a valid value other than
a field's default to probe it with (`other_value`).

A read counts when a config dataclass's field is fetched by the code that does the run. Reads
made to check or copy a config do not count: any frame on the stack that is a check
(`__post_init__`, a name holding "problem", "refus" or the word "check"), a dataclass copy,
comparison or serialisation (`replace`, `asdict`, `__eq__`, `jsonable`, `to_dict`, ...) or the
help text."""

from __future__ import annotations

import contextlib
import dataclasses
import re
import sys
import threading
import typing
from collections.abc import Iterator
from typing import Any

from jaxrl_dist.config import TrainConfig

_NOT_A_USE = {
    "__post_init__",
    "__eq__",
    "__repr__",
    "__hash__",
    "replace",
    "asdict",
    "_asdict_inner",
    "astuple",
    "jsonable",
    "to_dict",
    "help_text",
    "describe",
    "set_without_games",
    "field_default",
}
_A_CHECK = re.compile(r"problem|refus|(^|_)check(?!point)")


def _a_use(frame: Any) -> bool:
    """Whether no frame from `frame` up checks, copies or prints the config."""
    while frame is not None:
        name = frame.f_code.co_name
        if name in _NOT_A_USE or _A_CHECK.search(name):
            return False
        frame = frame.f_back
    return True


def section_classes(algo_cls: type) -> dict[type, str]:
    """{config dataclass: its path prefix} for a run config with `algo_cls`."""
    prefixes: dict[type, str] = {TrainConfig: "", algo_cls: "algo."}

    def walk(cls: type, prefix: str) -> None:
        for name, kind in typing.get_type_hints(cls).items():
            if dataclasses.is_dataclass(kind):
                prefixes[kind] = f"{prefix}{name}."
                walk(kind, f"{prefix}{name}.")

    walk(TrainConfig, "")
    return prefixes


@contextlib.contextmanager
def recorded_reads(algo_cls: type) -> Iterator[set[str]]:
    """Inside: every field read for use (module docstring) is added to the yielded set, by its
    dotted path (`"sebulba.inference.client"`), from every thread."""
    reads: set[str] = set()
    lock = threading.Lock()
    originals = {}
    for cls, prefix in section_classes(algo_cls).items():
        fields = {f.name for f in dataclasses.fields(cls)}
        original = cls.__getattribute__

        def getattribute(self, name, _fields=fields, _prefix=prefix, _original=original):
            if name in _fields and _a_use(sys._getframe(1)):
                with lock:
                    reads.add(_prefix + name)
            return _original(self, name)

        originals[cls] = original
        cls.__getattribute__ = getattribute
    try:
        yield reads
    finally:
        for cls, original in originals.items():
            cls.__getattribute__ = original


# Fields whose other value the generic rule below cannot make (a choice, a name, None).
OTHER = {
    "eval_mode": "sampled",
    "eval_metric": "return_std",
    "eval_env_id": "CartPole-v1",
    "eval_env_kwargs": {"max_episode_steps": 100},
    "eval_in_background": True,
    "warm_start": "some_run",
    "network.torso": "mlp",
    "network.activation": "relu",
    "network.dtype": "bfloat16",
    "network.core": "lstm",
    "intrinsic.method": "rnd",
    "replay.save": False,
    "sebulba.actor_loop": "xla",
    "sebulba.inference.client": "server",
    "seats.eval_opponent": "heuristic",
    "seats.pool_sampling": "uniform",
    "seats.games": (("learner", "random"),),
    "wandb.mode": "offline",
    "algo.optimizer": "adam",
    "algo.advantage_estimator": "vtrace",
    "algo.loss": "l2",
    "algo.target_update": "polyak",
}


# What a probe sets beside a field whose other value needs it (the checks refuse it alone).
BESIDE = {"sebulba.sync_collection": {"sebulba.async_envs": False}}
# The other way round, where a config already holds OTHER's value.
CHOICES_BACK = {
    "network.torso": "auto",
    "network.activation": "tanh",
    "network.core": "none",
    "algo.optimizer": "rmsprop",
    "algo.loss": "huber",
}


def other_value(path: str, default: Any) -> Any:
    """A value of field `path` other than its `default`, valid by itself where it can be."""
    if path in OTHER:
        choice = OTHER[path]
        return choice if choice != default else CHOICES_BACK.get(path, default)
    if isinstance(default, bool):
        return not default
    if isinstance(default, int):
        return default * 2 if default > 0 else default + 1
    if isinstance(default, float):
        return default / 2 if default > 0 else 0.5
    if isinstance(default, str):
        return default + "x" if default else "x"
    if isinstance(default, tuple):
        return default * 2 if default else (1,)
    if isinstance(default, dict):
        return {**default, "x": 1}
    if default is None:
        return 1.0
    raise TypeError(f"no other value for {path}={default!r}")
