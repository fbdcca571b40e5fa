"""Run-time requests beyond hyperparameters (pytorchrl's `set_weights` and
`update_storage_parameter`): params loaded into a running job from a checkpoint, and replay
settings, asked for in the same `control.json` as the hyperparameters (or from Python with
`Trainer.control`), checked on arrival as at the start, applied by every process before the
same update, logged, and kept across a resume.

    {"load_params": "runs/other@best"}                   another run's params (RUN[@STEP])
    {"load_params": "runs/this_run@best"}                or this run's own best
    {"replay.samples_per_insert": 2.0, "replay.priority_exponent": 0.4}
    {"rb/load_params": "runs/x", "rb/replay.samples_per_insert": 8}   several agents: NAME/

A load resolves its step when it is checked (`RUN@latest` is the step then) and is recorded as
`RUN@STEP`; every process reads it from there. The replay's rate limiter goes on from its
counts (`RateLimiter.with_ratio`); a new priority exponent re-weighs every held priority.
"""

from __future__ import annotations

import json
import numbers
from typing import Any

import numpy as np

from jaxrl_dist.config import ConfigError
from jaxrl_dist.run.checkpoint import tree_digest
from jaxrl_dist.run.preflight import warm_params

LOAD = "load_params"
REPLAY = "replay."
RUNTIME_REPLAY_FIELDS = ("samples_per_insert", "priority_exponent")
BLOB_BYTES = 4096  # a request as JSON bytes, the same size on every process (a gather)


class ControlError(ValueError):
    """A request that cannot be applied; the message is one line."""


class RunRequests:
    """Pending loads and replay settings of a run's agents (`names`: one agent "learner",
    whose keys have no prefix, or several, `NAME/key`)."""

    def __init__(self, engine: Any, env_id: str, names: list[str], prefixed: bool):
        self._engine, self._env_id = engine, env_id
        self._names, self._prefixed = names, prefixed
        self._pending: dict[str, Any] = {}
        self._loaded: dict[str, Any] = {}  # process 0: the params read at the check

    @property
    def keys(self) -> tuple[str, ...]:
        own = (LOAD, *(REPLAY + f for f in RUNTIME_REPLAY_FIELDS))
        if not self._prefixed:
            return own
        return tuple(f"{name}/{k}" for name in self._names for k in own)

    def claims(self, key: str) -> bool:
        """Whether `key` of a request is one of these (the rest are hyperparameters)."""
        own = key.partition("/")[2] if self._prefixed else key
        return own == LOAD or own.startswith(REPLAY)

    @property
    def has_pending(self) -> bool:
        return bool(self._pending)

    def check(self, values: dict[str, Any]) -> dict[str, Any]:
        """`values` checked as at the start (ControlError, one line): loads resolved to
        `RUN@STEP` and read, replay settings the agent's replay takes."""
        checked, replay = {}, {}
        for key, value in values.items():
            name, own = self._split(key)
            if own == LOAD:
                checked[key] = self._checked_load(key, name, value)
            elif own[len(REPLAY) :] in RUNTIME_REPLAY_FIELDS:
                replay.setdefault(name, {})[own[len(REPLAY) :]] = _number(key, value)
                checked[key] = replay[name][own[len(REPLAY) :]]
            else:
                fields = ", ".join(REPLAY + f for f in RUNTIME_REPLAY_FIELDS)
                raise ControlError(f"{key} cannot change at run time (replay: {fields})")
        for name, settings in replay.items():
            problem = self._engine.replay_problem(name, settings)
            if problem:
                raise ControlError(f"{self._key(name, 'replay')}: {problem}")
        return checked

    def queue(self, checked: dict[str, Any]) -> None:
        self._pending.update(checked)

    def blob(self) -> np.ndarray:
        """The pending requests as `[BLOB_BYTES]` uint8 (JSON), what process 0 sends."""
        data = json.dumps(self._pending).encode()
        if len(data) > BLOB_BYTES - 4:
            raise ControlError(f"a request of {len(data)} bytes: keep it under {BLOB_BYTES - 4}")
        out = np.zeros(BLOB_BYTES, np.uint8)
        out[:4] = np.frombuffer(np.uint32(len(data)).tobytes(), np.uint8)
        out[4 : 4 + len(data)] = np.frombuffer(data, np.uint8)
        return out

    def apply(self, blob: np.ndarray) -> tuple[dict[str, Any], list[str]]:
        """Applies process 0's requests (`blob`) on this process: `{key: value}` as recorded
        (a load as `RUN@STEP`) and one progress line each."""
        size = int(np.frombuffer(blob[:4].tobytes(), np.uint32)[0])
        requests = json.loads(blob[4 : 4 + size].tobytes().decode()) if size else {}
        lines, replay = [], {}
        for key, value in requests.items():
            name, own = self._split(key)
            if own == LOAD:
                params = self._loaded.pop(key, None)
                if params is None:  # another process: read it here
                    params = self._read(key, name, value)[2]
                self._engine.load_params(name, params)
                lines.append(
                    f"{self._key(name, 'params')} loaded from {value} "
                    f"(sha256 {tree_digest(params)[:12]})"
                )
            else:
                replay.setdefault(name, {})[own[len(REPLAY) :]] = value
        for name, settings in replay.items():
            self._engine.set_replay(name, settings)
            text = ", ".join(f"replay.{k} {v:g}" for k, v in settings.items())
            lines.append(f"{self._key(name, 'replay')}: {text}")
        self._pending.clear()
        return requests, lines

    def kept(
        self, changes: list[dict[str, Any]], saved: dict[str, dict], given: dict[str, dict]
    ) -> dict[str, float]:
        """At a resume: the replay settings changed at run time before it (`changes`:
        `counters.hparam_changes`), which the replay, rebuilt from the config, must take again;
        not where the config at resume (`given`) differs from the one saved (`saved`; both
        `{name: replay config dict}`): the user changed it for this resume, and it stands."""
        latest: dict[str, float] = {}
        for change in changes:
            for key, value in change.get("values", {}).items():
                name, own = self._split(key, strict=False)
                if name is not None and own.startswith(REPLAY):
                    latest[key] = value
        kept = {}
        for key, value in latest.items():
            name, own = self._split(key)
            field = own[len(REPLAY) :]
            if field in saved.get(name, {}) and given[name].get(field) == saved[name][field]:
                kept[key] = value
        return kept

    # ------------------------------------------------------------------ helpers
    def _split(self, key: str, strict: bool = True) -> tuple[str | None, str]:
        """`key` -> (agent name, its own key)."""
        if not self._prefixed:
            return self._names[0], key
        name, _, own = key.partition("/")
        if name not in self._names:
            if not strict:
                return None, own
            raise ControlError(f"{key} names no agent ({', '.join(self._names)})")
        return name, own

    def _key(self, name: str, what: str) -> str:
        return f"agent {name}'s {what}" if self._prefixed else what

    def _checked_load(self, key: str, name: str, value: Any) -> str:
        if not isinstance(value, str) or not value:
            raise ControlError(f"{key}={value!r}: give a run's directory, RUN[@latest|@best|@STEP]")
        path, step, self._loaded[key] = self._read(key, name, value)
        return f"{path}@{step}"

    def _read(self, key: str, name: str, spec: str) -> tuple[str, int, Any]:
        like = self._engine.params_like(name)
        try:
            return warm_params(spec, like, self._env_id, field=key)
        except ConfigError as e:
            raise ControlError(str(e).splitlines()[0]) from None


def _number(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ControlError(f"{key}={value!r} is not a number")
    return float(value)
