"""An agent's replay settings changed at run time (`Trainer.set_replay`, `config.replay`'s
run-time fields), checked as at the start, kept in checkpoints and taken back at a resume: the
part of a Sebulba lane (`sebulba/lane.py`) that reads its config, data flow and replay."""

from __future__ import annotations

import dataclasses
from typing import Any

from jaxrl_dist.config import ConfigError
from jaxrl_dist.config.sections import REPLAY_RUNTIME_FIELDS
from jaxrl_dist.data.flows import replay_tolerance


class ReplayControl:
    """A lane's run-time replay settings; the lane holds `config` (its agent's view), `data`
    (its data seam, None when it does not learn), `flow`, `learning`, `name` and `_layout`."""

    config: Any
    data: Any
    flow: Any
    learning: bool
    name: str
    _layout: Any

    def replay_problem(self, settings: dict[str, float], num_processes: int) -> str | None:
        """Why this agent's replay cannot take `settings` now (one line), or None: checked as
        at the start (the config's checks, the data flow's, the rate limiter's bound)."""
        who = self._layout.who(self.name) or f"config.algorithm={self.config.algorithm!r}"
        if not self._has_replay:
            what = "learns from no replay" if self.learning else "does not learn"
            return f"{who} {what}: it has no replay settings"
        unread = [f for f in settings if f not in self.flow.reads]
        if "priority_exponent" in settings and not hasattr(self.data, "set_priority_exponent"):
            unread.append("priority_exponent")
        if unread:
            return f"replay.{unread[0]} is not used by {who}'s replay"
        try:
            config = self._with_replay(settings)
        except ConfigError as e:
            return str(e).splitlines()[0]
        return self.flow.check(config) or self.data.rate_problem(*self._rate(config, num_processes))

    def set_replay(
        self, settings: dict[str, float], num_processes: int, resumed: bool = False
    ) -> None:
        """Takes `settings` (checked by `replay_problem`) from the next read on; `resumed`:
        the settings in force when the restored replay was saved (its limiter's offset and
        its priorities, stored with that exponent, are kept as they are)."""
        self.config = self._with_replay(settings)
        self.data.set_rate(*self._rate(self.config, num_processes), resumed=resumed)
        if "priority_exponent" in settings:
            self.data.set_priority_exponent(settings["priority_exponent"], reweigh=not resumed)

    def replay_settings(self) -> dict[str, float] | None:
        """The run-time replay settings in force (what a checkpoint keeps), or None."""
        if not self._has_replay:
            return None
        return {f: getattr(self.config.replay, f) for f in REPLAY_RUNTIME_FIELDS}

    @property
    def _has_replay(self) -> bool:
        """A replay whose settings can change (a learning agent's host replay)."""
        return self.data is not None and hasattr(self.data, "set_rate")

    def resume_replay(self, saved: dict[str, float], saved_config: dict[str, Any], n: int) -> None:
        """At a resume: the replay settings in force at the checkpoint (`saved`) where they
        differ from the config's, unless this config changes that field from the saved run
        config's (`saved_config`, its replay section): the user's change for this resume."""
        replay = self.config.replay
        back = {
            f: v
            for f, v in saved.items()
            if v != getattr(replay, f) and saved_config.get(f) == getattr(replay, f)
        }
        if back and self._has_replay:
            self.set_replay(back, n, resumed=True)

    def _with_replay(self, settings: dict[str, float]) -> Any:
        return dataclasses.replace(
            self.config, replay=dataclasses.replace(self.config.replay, **settings)
        )

    def _rate(self, config: Any, num_processes: int) -> tuple[float, float]:
        """The replay's (samples per item, tolerance) for `config`, as built at the start."""
        per_segment = self.data.items_per_segment
        spi = config.replay.samples_per_insert
        return spi, replay_tolerance(config, num_processes, per_segment)


def saved_replay(config: dict[str, Any], name: str) -> dict[str, Any]:
    """Agent `name`'s replay section of a checkpoint's run config (`meta["config"]`)."""
    for agent in config.get("agents", ()):
        if agent["name"] == name:
            return agent.get("replay", {})
    return config.get("replay", {})
