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
`RUN@STEP`; every process reads it from there, and none applies it unless all could. The
replay's rate limiter goes on from its counts (`RateLimiter.with_ratio`); a new priority
exponent re-weighs every held priority. Checkpoints keep the replay settings in force, and a
resume puts them back (the engine's `begin`) unless its config changes that field.
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from jaxrl_dist.checkpoints.store import tree_digest
from jaxrl_dist.config import ConfigError
from jaxrl_dist.config.sections import REPLAY_RUNTIME_FIELDS
from jaxrl_dist.run.hparams import HyperparamControl, LanesHyperparamControl
from jaxrl_dist.run.layout import Layout
from jaxrl_dist.run.preflight import warm_params

LOAD = "load_params"
REPLAY = "replay."
BLOB_BYTES = 4096  # a request as JSON bytes, the same size on every process (a gather)


def run_control(config: Any, engine: Any, workdir: str, primary: bool) -> HyperparamControl:
    """A run's control: its agent's run-time hyperparameters (each agent's, `NAME/field`, with
    several), with the loads and replay settings of `RunRequests`."""
    names = {name: agent.hyperparams for name, agent in engine.agents.items()}
    views, layout = list(engine.views.values()), engine.layout
    control = LanesHyperparamControl.for_lanes(views, names, layout, workdir, primary)
    control.requests = RunRequests(engine, config.env_id, layout)
    return control


class Checked(NamedTuple):
    """A request that passed `RunRequests.check`: its values as recorded (a load as
    `RUN@STEP`) and the params each load read, by key."""

    values: dict[str, Any]
    params: dict[str, Any]


class ControlError(ValueError):
    """A request that cannot be applied; the message is one line."""


class RunRequests:
    """Pending loads and replay settings of a run's agents, keyed as `layout` writes them (one
    agent's keys have no prefix, several agents' are `NAME/key`)."""

    def __init__(self, engine: Any, env_id: str, layout: Layout):
        self._engine, self._env_id = engine, env_id
        self._names, self._layout = layout.names, layout
        self._pending: dict[str, Any] = {}
        self._loaded: dict[str, Any] = {}  # process 0: the params read at the check

    @property
    def keys(self) -> tuple[str, ...]:
        own = (LOAD, *(REPLAY + f for f in REPLAY_RUNTIME_FIELDS))
        return tuple(self._layout.prefix(name) + k for name in self._names for k in own)

    def claims(self, key: str) -> bool:
        """Whether `key` of a request is one of these (the rest are hyperparameters)."""
        own = self._layout.split_key(key)[1]
        return own == LOAD or own.startswith(REPLAY)

    @property
    def has_pending(self) -> bool:
        return bool(self._pending)

    def check(self, values: dict[str, Any]) -> Checked:
        """`values` checked as at the start, whole (ControlError, one line; nothing is kept):
        loads resolved to `RUN@STEP` and read, replay settings the agent's replay takes."""
        checked, replay, params = {}, {}, {}
        for key, value in values.items():
            name, own = self._split(key)
            if own == LOAD:
                checked[key], params[key] = self._checked_load(key, name, value)
            elif own[len(REPLAY) :] in REPLAY_RUNTIME_FIELDS:
                replay.setdefault(name, {})[own[len(REPLAY) :]] = _number(key, value)
                checked[key] = replay[name][own[len(REPLAY) :]]
            else:
                fields = ", ".join(REPLAY + f for f in REPLAY_RUNTIME_FIELDS)
                raise ControlError(f"{key} cannot change at run time (replay: {fields})")
        for name, settings in replay.items():
            problem = self._engine.replay_problem(name, settings)
            if problem:
                raise ControlError(f"{self._key(name, 'replay')}: {problem}")
        size = len(json.dumps({**self._pending, **checked}).encode())
        if size > BLOB_BYTES - 4:
            raise ControlError(
                f"the requests come to {size} bytes: keep them under {BLOB_BYTES - 4}"
            )
        return Checked(checked, params)

    def queue(self, checked: Checked) -> None:
        self._pending.update(checked.values)
        self._loaded.update(checked.params)

    def blob(self) -> np.ndarray:
        """The pending requests as `[BLOB_BYTES]` uint8 (JSON), what process 0 sends (its
        size is checked at `check`)."""
        data = json.dumps(self._pending).encode()
        out = np.zeros(BLOB_BYTES, np.uint8)
        out[:4] = np.frombuffer(np.uint32(len(data)).tobytes(), np.uint8)
        out[4 : 4 + len(data)] = np.frombuffer(data, np.uint8)
        return out

    def apply(
        self, blob: np.ndarray, gather: Callable[[np.ndarray], np.ndarray]
    ) -> tuple[dict[str, Any], list[str]]:
        """Applies process 0's requests (`blob`) on this process: `{key: value}` as recorded
        (a load as `RUN@STEP`) and one progress line each. Every process first reads the
        params it loads (process 0 read them at the check) and all agree (`gather`) before
        anything is applied: where one could not (a step deleted since), none applies them."""
        size = int(np.frombuffer(blob[:4].tobytes(), np.uint32)[0])
        requests = json.loads(blob[4 : 4 + size].tobytes().decode()) if size else {}
        loaded, self._loaded, self._pending = self._loaded, {}, {}
        loads, replay, problem = {}, {}, ""
        for key, value in requests.items():
            name, own = self._split(key)
            if own != LOAD:
                replay.setdefault(name, {})[own[len(REPLAY) :]] = value
            elif key in loaded:
                loads[key] = (name, loaded[key])
            else:  # another process: read it here
                try:
                    loads[key] = (name, self._read(key, name, value)[2])
                except ControlError as e:
                    problem = str(e)
        failed = np.flatnonzero(gather(np.array(not problem, np.int32)) == 0)
        if failed.size:
            return {}, [f"warning: not applied, process {failed[0]} could not read the params"]
        lines = []
        for key, (name, params) in loads.items():
            self._engine.load_params(name, params)
            digest = tree_digest(params)[:12]
            lines.append(f"{self._key(name, 'params')} loaded from {requests[key]} ({digest})")
        for name, settings in replay.items():
            self._engine.set_replay(name, settings)
            text = ", ".join(f"replay.{k} {v:g}" for k, v in settings.items())
            lines.append(f"{self._key(name, 'replay')}: {text}")
        return requests, lines

    # ------------------------------------------------------------------ helpers
    def _split(self, key: str, strict: bool = True) -> tuple[str | None, str]:
        """`key` -> (agent name, its own key)."""
        name, own = self._layout.split_key(key)
        if name is None and strict:
            raise ControlError(f"{key} names no agent ({', '.join(self._names)})")
        return name, own

    def _key(self, name: str, what: str) -> str:
        who = self._layout.who(name)
        return f"{who}'s {what}" if who else what

    def _checked_load(self, key: str, name: str, value: Any) -> tuple[str, Any]:
        """(`RUN@STEP`, the params) a load names."""
        if not isinstance(value, str) or not value:
            raise ControlError(f"{key}={value!r}: give a run's directory, RUN[@latest|@best|@STEP]")
        path, step, params = self._read(key, name, value)
        return f"{path}@{step}", params

    def _read(self, key: str, name: str, spec: str) -> tuple[str, int, Any]:
        """A source run of several agents gives its agent of the same name."""
        like, agent = self._engine.params_like(name), self._layout.named(name)
        try:
            return warm_params(spec, like, self._env_id, agent, field=key)
        except (ConfigError, OSError, ValueError) as e:
            raise ControlError(str(e).splitlines()[0]) from None


def _number(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ControlError(f"{key}={value!r} is not a number")
    return float(value)
