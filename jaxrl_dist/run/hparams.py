"""Hyperparameters changed while a run goes on: from a hook, or from a JSON control file.

The values live in `LearnerState.hparams` (traced by the update, so a change needs no recompile,
and checkpointed, so a resume keeps them). Requests are checked on arrival with the algorithm
config's own checks; all processes apply them at the same update (process 0's requests travel in
the trainer's per-update agreement). `control.json` in the work dir is polled by process 0:

    echo '{"learning_rate": 1e-4, "entropy_cost": 0.005}' > RUN/control.json

Process 0 claims the file by renaming it `control.json.queued` (a file written later is the next
request), renames it `control.json.applied` once every process applied it (a run that stops
first leaves it queued, and a resume applies it), or `control.json.rejected` with one line on
stderr saying why; the run goes on either way. Each change is saved after the next update.
"""

from __future__ import annotations

import dataclasses
import json
import numbers
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_dist import agents

CONTROL_FILE = "control.json"
POLL_EVERY_S = 1.0
FLOAT32_MAX = float(np.finfo(np.float32).max)


class HyperparamError(ValueError):
    """A run-time hyperparameter request that cannot be applied; the message is one line."""


class HyperparamControl:
    """Pending run-time changes of the algorithm config fields named in `names`."""

    def __init__(
        self,
        algo_config: Any,
        names: tuple[str, ...],
        workdir: str,
        primary: bool,
        check: Callable[[Any], str | None] = lambda algo_config: None,
    ):
        """`check(algo_config)`: the agent's check against the rest of the run's config (one
        line or None), run on every request as at the start (`AgentEntry.check`)."""
        self.names = names
        self._check = check
        self._config = algo_config  # the values now in force, for the checks
        self._pending: dict[str, float] = {}
        self._sources: list[str] = []
        self._path = os.path.join(workdir, CONTROL_FILE)
        self._queued = self._path + ".queued"
        self._primary = primary  # process 0: polls the file; its pending values are the ones
        self._next_poll = 0.0
        self._file_queued = False  # its values wait for the next update
        # Loads and replay settings asked in the same requests (`run/control.py`), if the run
        # takes them.
        self.requests: Any = None

    @classmethod
    def for_run(
        cls, config: Any, hyperparams: tuple[str, ...], workdir: str, primary: bool
    ) -> HyperparamControl:
        """The control of a run of `config` (a `TrainConfig`), whose agent can change
        `hyperparams`; requests are checked by the algorithm's own check against the run."""
        check = agents.get(config.algorithm).check
        return cls(
            config.algo,
            hyperparams,
            workdir,
            primary,
            lambda algo_config: check(algo_config, config),
        )

    def resume(self, hparams: dict[str, jax.Array], saved_algo: dict[str, Any]) -> None:
        """Takes the values a restored state holds as the ones in force, except where this
        run's config differs from the config the checkpoint was saved with: there the user
        changed it for this resume, and it is requested (applied before the first update)."""
        given = self._config
        restored = {k: float(np.asarray(jax.device_get(v))) for k, v in hparams.items()}
        self._config = dataclasses.replace(given, **restored)
        changed = {
            name: getattr(given, name)
            for name in self.names
            if name in saved_algo and float(getattr(given, name)) != float(saved_algo[name])
        }
        if changed:
            self.request(changed, source="the config at resume")

    def request(self, values: dict[str, Any], source: str = "hook") -> None:
        """Queues `values` for the next update. Raises HyperparamError (nothing queued) for an
        unknown name or a value the algorithm's config refuses."""
        extra, values = self._take_requests(values)
        values = self._checked(values) if values or extra is None else {}
        self._queue(values, extra, source)

    def _take_requests(self, values: Any) -> tuple[Any, Any]:
        """(the loads and replay settings of `values`, checked, or None; the
        hyperparameters)."""
        if self.requests is None or not isinstance(values, dict):
            return None, values
        extra = {k: v for k, v in values.items() if self.requests.claims(k)}
        if not extra:
            return None, values
        try:
            checked = self.requests.check(extra)
        except ValueError as e:  # ControlError, one line
            raise HyperparamError(str(e)) from None
        return checked, {k: v for k, v in values.items() if k not in extra}

    def _queue(self, values: dict[str, float], extra: Any, source: str) -> None:
        """Queues checked hyperparameters and `RunRequests.check`'s result (or None)."""
        self._pending.update(values)
        if extra is not None:
            self.requests.queue(extra)
        self._sources.append(source)

    def _checked(self, values: dict[str, Any]) -> dict[str, float]:
        if not isinstance(values, dict) or not values:
            raise HyperparamError('give a JSON object of new values, e.g. {"learning_rate": 1e-4}')
        unknown = sorted(set(values) - set(self.names))
        if unknown:
            names = ", ".join(unknown)
            can = ", ".join((*self.names, *(self.requests.keys if self.requests else ())))
            raise HyperparamError(f"{names} cannot change at run time; these can: {can}")
        out = {}
        for name, value in values.items():
            number = isinstance(value, numbers.Real) or (
                hasattr(value, "dtype") and np.ndim(value) == 0  # a NumPy or JAX scalar
            )
            if isinstance(value, bool) or not number:
                raise HyperparamError(f"{name}={value!r} is not a number")
            out[name] = float(value)
            if not abs(out[name]) <= FLOAT32_MAX:  # the update reads float32
                raise HyperparamError(f"{name}={value!r} is not a finite float32")
        as_used = {k: float(np.float32(v)) for k, v in {**self._pending, **out}.items()}
        try:  # the config's own checks, on the values the update will read
            problem = self._check(dataclasses.replace(self._config, **as_used))
        except ValueError as e:
            raise HyperparamError(str(e).split("; fix it")[0]) from None
        if problem:
            raise HyperparamError(problem)
        return out

    def poll(self) -> None:
        """Claims and reads the control file (at most every POLL_EVERY_S; process 0 only)."""
        now = time.monotonic()
        if not self._primary or self._file_queued or now < self._next_poll:
            return
        self._next_poll = now + POLL_EVERY_S
        try:
            if not os.path.exists(self._queued):  # else left queued by an earlier part of the run
                if not os.path.exists(self._path):
                    return
                os.replace(self._path, self._queued)
            with open(self._queued) as f:
                values = json.load(f)
            self.request(values, source=CONTROL_FILE)
            self._file_queued = True
        except (OSError, ValueError, OverflowError) as e:  # JSON, encoding, HyperparamError
            why = str(e).splitlines()[0] if str(e) else type(e).__name__
            print(
                f"warning: {self._path} rejected ({why}); renamed to {CONTROL_FILE}.rejected, "
                "the run goes on with its values",
                file=sys.stderr,
            )
            _rename(self._queued, self._path + ".rejected")

    @property
    def has_pending(self) -> bool:
        return bool(self._pending) or (self.requests is not None and self.requests.has_pending)

    def pending_row(self) -> np.ndarray:
        """`[len(names)]` float32: the pending values, NaN where a value does not change."""
        return np.array([self._pending.get(n, np.nan) for n in self.names], np.float32)

    def apply(self, hparams: dict[str, jax.Array], row: np.ndarray) -> tuple[dict, dict, str]:
        """New `hparams` with the non-NaN values of `row` (process 0's pending row; the engine
        places them), `{name: (old, new)}` of what changed, and who asked for it."""
        # Process 0 logs the values as given, not float32-rounded; the others take its row.
        exact = self._pending if self._primary else {}
        changes = {
            name: (float(getattr(self._config, name)), exact.get(name, float(value)))
            for name, value in zip(self.names, row, strict=True)
            if not np.isnan(value)
        }
        self._config = dataclasses.replace(
            self._config, **{name: new for name, (_, new) in changes.items()}
        )
        new = {name: jnp.asarray(new, jnp.float32) for name, (_, new) in changes.items()}
        return {**hparams, **new}, changes, self._applied()

    def _applied(self) -> str:
        """After an apply: who asked (the requests' sources); the control file, if one was
        queued, renamed `.applied`."""
        self._pending.clear()
        sources, self._sources = ", ".join(dict.fromkeys(self._sources)) or "process 0", []
        if self._file_queued:
            _rename(self._queued, self._path + ".applied")
            self._file_queued = False
        return sources

    def saved_algo(self, saved_config: dict[str, Any]) -> Any:
        """What `resume` compares with: the algo config a checkpoint's run config holds."""
        return saved_config["algo"]

    def record(
        self, counters: Any, changes: dict, sources: str, requests: dict | None = None
    ) -> tuple[dict[str, float], str]:
        """Notes `changes` (and the loads and replay settings `requests` applied with them,
        `{key: value}`) in `counters.hparam_changes` (kept in checkpoints and the summary);
        returns the metrics record (`hparams/<name>`, numbers only) and the changes' text."""
        requests = requests or {}
        counters.hparam_changes.append(
            {
                "updates": counters.updates,
                "env_steps": counters.env_steps,
                "source": sources,
                "values": {**{k: new for k, (_, new) in changes.items()}, **requests},
            }
        )
        text = ", ".join(f"{k} {old:g} -> {new:g}" for k, (old, new) in changes.items())
        record = {f"hparams/{k}": new for k, (_, new) in changes.items()}
        record.update({f"hparams/{k}": v for k, v in requests.items() if not isinstance(v, str)})
        return record, text


class LanesHyperparamControl(HyperparamControl):
    """A run's run-time changes, over its lanes (`run/layout.py`): each name is a lane's field
    as the layout keys it (one agent's `learning_rate`; several agents' `NAME/field`,
    `{"ppo/learning_rate": 1e-4}` in `control.json`), checked by that agent's algorithm against
    its view of the run; every request is checked whole before any of it is queued. The
    engine's hyperparameters are keyed alike."""

    def __init__(
        self, controls: dict[str, HyperparamControl], layout: Any, workdir: str, primary: bool
    ):
        names = tuple(layout.prefix(lane) + n for lane, c in controls.items() for n in c.names)
        super().__init__(None, names, workdir, primary)
        self._controls, self._layout = controls, layout

    @classmethod
    def for_lanes(
        cls,
        views: Any,
        hyperparams: dict[str, tuple[str, ...]],
        layout: Any,
        workdir: str,
        primary: bool,
    ) -> LanesHyperparamControl:
        """`views`: the agents' `AgentView`s; `hyperparams`: what each agent can change."""
        controls = {
            v.name: HyperparamControl.for_run(v.config, hyperparams[v.name], workdir, primary)
            for v in views
        }
        return cls(controls, layout, workdir, primary)

    @property
    def requests(self) -> Any:
        return self._requests

    @requests.setter
    def requests(self, requests: Any) -> None:
        """The loads and replay settings the run takes: each lane's control names them among
        what can change when it refuses a field."""
        self._requests = requests
        for control in getattr(self, "_controls", {}).values():
            control.requests = requests

    def _split(self, flat: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """`{key: v}` -> `{lane: {field: v}}` (HyperparamError for a key of no lane)."""
        out: dict[str, dict[str, Any]] = {lane: {} for lane in self._controls}
        for key, value in flat.items():
            lane, name = self._layout.split_key(key)
            if lane not in out or not name:
                raise HyperparamError(
                    f"{key} names no agent's field; these can change: {', '.join(self.names)}"
                )
            out[lane][name] = value
        return out

    def request(self, values: dict[str, Any], source: str = "hook") -> None:
        if not isinstance(values, dict) or not values:
            raise HyperparamError(
                f'give a JSON object of new values, e.g. {{"{self.names[0]}": 1e-4}}'
            )
        extra, values = self._take_requests(values)
        checked = {  # every lane's part checked before any is queued
            lane: self._controls[lane]._checked(part)
            for lane, part in self._split(values).items()
            if part
        }
        for lane, part in checked.items():
            self._controls[lane]._pending.update(part)
        flat = {
            k: v
            for lane, part in checked.items()
            for k, v in self._layout.keyed(lane, part).items()
        }
        self._queue(flat, extra, source)

    def apply(self, hparams: dict[str, jax.Array], row: np.ndarray) -> tuple[dict, dict, str]:
        new, changes, at = dict(hparams), {}, 0
        for lane, control in self._controls.items():
            part = row[at : at + len(control.names)]
            at += len(control.names)
            mine = self._layout.mine(lane, hparams)
            applied, changed, _ = control.apply(mine, part)
            new.update(self._layout.keyed(lane, applied))
            changes.update(self._layout.keyed(lane, changed))
        return new, changes, self._applied()

    def resume(self, hparams: dict[str, jax.Array], saved_algo: dict[str, Any]) -> None:
        for lane, control in self._controls.items():
            control.resume(self._layout.mine(lane, hparams), saved_algo.get(lane, {}))
            self._pending.update(self._layout.keyed(lane, control._pending))
            self._sources.extend(control._sources)

    def saved_algo(self, saved_config: dict[str, Any]) -> dict[str, Any]:
        """Each lane's algo config as a checkpoint's run config holds it."""
        return self._layout.sections_of(saved_config, "algo")


def _rename(source: str, target: str) -> None:
    """Renames if it can: a file someone removed is no reason to stop a run."""
    try:
        os.replace(source, target)
    except OSError as e:
        print(f"warning: could not rename {source} to {target} ({e})", file=sys.stderr)
