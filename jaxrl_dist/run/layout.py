"""The one boundary where a run's number of agents shows: how its lanes appear on disk, in the
logs, in the summary and to hooks (issue 56).

A run is a tuple of lanes (`run/prepared.py:PreparedLane`), one per agent, each named; a
one-agent run is a tuple of one. Engines hold every agent as a lane and hand their per-lane
trees, records and summaries to a `Layout`, which writes one agent the way jaxrl_dist always
wrote a run (its state bare, its log keys and summary entries unprefixed, its params to hooks
and evaluators as they are) and several agents under `agents` and `NAME/`
(`docs/concepts/glossary.md`). Nothing else asks how many lanes there are.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from jaxrl_dist.data import snapshot as npz
from jaxrl_dist.types import keys_under

T = TypeVar("T")
AGENTS = "agents"  # the key several agents' trees, meta and summaries sit under


class Layout:
    """How the lanes `names` (in `config.agents` order) are written."""

    def __init__(self, names: Iterable[str]):
        self.names = tuple(names)
        if not self.names:
            raise ValueError("a run has at least one lane")
        self._bare = len(self.names) == 1  # one agent: written as a run always was

    # ------------------------------------------------------------------ log keys
    def prefix(self, name: str) -> str:
        """Lane `name`'s log-key prefix: "" for one agent, "NAME/" for several."""
        return "" if self._bare else f"{name}/"

    def keyed(self, name: str, record: Mapping[str, T]) -> dict[str, T]:
        """Lane `name`'s record with its keys prefixed."""
        prefix = self.prefix(name)
        return {prefix + k: v for k, v in record.items()}

    def mine(self, name: str, record: Mapping[str, T]) -> dict[str, T]:
        """Lane `name`'s entries of a run's record, prefix removed."""
        return keys_under(dict(record), self.prefix(name))

    def split_key(self, key: str) -> tuple[str | None, str]:
        """A run-level key (`control.json`'s, a hook's) -> (its lane's name, the lane's own
        key): one agent's keys are its own; several agents' `NAME/key` (None: no such lane)."""
        if self._bare:
            return self.names[0], key
        name, _, own = key.partition("/")
        return (name if name in self.names else None), own

    def counters(self, counters: Any, updates: int, env_steps: int) -> Any:
        """The counters a lane's log record shows: its own updates and env steps when it is
        one of several, the run's when it is the run."""
        if self._bare:
            return counters
        return dataclasses.replace(counters, updates=updates, env_steps=env_steps)

    # ------------------------------------------------------------------ trees
    def tree(self, per_lane: Mapping[str, T]) -> Any:
        """The tree of each lane's state, params or shapes (by name): one agent's bare,
        several under `agents` (what a checkpoint holds, `checkpoints.store.agent_state`)."""
        return per_lane[self.names[0]] if self._bare else {AGENTS: dict(per_lane)}

    def lanes_of(self, tree: Any) -> dict[str, Any]:
        """`tree`'s inverse: each lane's part by name."""
        return {self.names[0]: tree} if self._bare else dict(tree[AGENTS])

    def params(self, per_lane: Mapping[str, T]) -> Any:
        """What hooks, evaluators and digests get: one agent's params as they are, several
        agents' by name."""
        return per_lane[self.names[0]] if self._bare else dict(per_lane)

    def params_of(self, params: Any) -> dict[str, Any]:
        """`params`' inverse: each lane's params by name."""
        return {self.names[0]: params} if self._bare else {n: params[n] for n in self.names}

    def joined(self, per_lane: Mapping[str, T]) -> Any:
        """Each lane's part as one program's (Anakin's carry): one agent's as it is, several
        agents' a tuple in lane order."""
        return per_lane[self.names[0]] if self._bare else tuple(per_lane[n] for n in self.names)

    def split(self, joined: Any) -> dict[str, Any]:
        """`joined`'s inverse: each lane's part by name."""
        return {self.names[0]: joined} if self._bare else dict(zip(self.names, joined, strict=True))

    # ------------------------------------------------------------------ meta and summary
    def meta(self, per_lane: Mapping[str, dict[str, Any]], **shared: Any) -> dict[str, Any]:
        """What a checkpoint's meta adds for its lanes: several agents' counters (`per_lane`)
        under `agents` and what they share (the policies, the rotation); nothing for one agent,
        whose counters are the run's."""
        return {} if self._bare else {AGENTS: dict(per_lane), **shared}

    def lane_counts(self, meta: Mapping[str, Any], updates: int, env_steps: int) -> dict:
        """Each lane's `{"updates", "env_steps"}` saved by a checkpoint's `meta`: one agent's
        are the run's (`updates`, `env_steps`), several agents' their own (0 where older
        checkpoints kept none)."""
        if self._bare:
            return {self.names[0]: {"updates": updates, "env_steps": env_steps}}
        saved = meta.get(AGENTS, {})
        return {
            name: {
                "updates": saved.get(name, {}).get("updates", 0),
                "env_steps": saved.get(name, {}).get("env_steps", 0),
            }
            for name in self.names
        }

    def sections_of(self, saved_config: Mapping[str, Any], section: str) -> dict[str, Any]:
        """Each lane's `section` (`"algo"`, ...) of a saved run config (`config.json`, a
        checkpoint's meta): one agent's at its top level, several agents' in `agents`."""
        if self._bare:
            return {self.names[0]: saved_config[section]}
        return {agent["name"]: agent[section] for agent in saved_config.get(AGENTS, ())}

    # ------------------------------------------------------------------ per-process items
    def items(self, per_lane: Mapping[str, dict[str, bytes]]) -> dict[str, bytes]:
        """Each lane's checkpoint items (`{item: npz bytes}`) as one of each: one agent's as
        they are (a replay's contents are not decoded again), several agents' arrays keyed
        "NAME/<key>"."""
        if self._bare:
            return dict(per_lane[self.names[0]])
        joined: dict[str, dict[str, Any]] = {}
        for name, items in per_lane.items():
            for item, data in items.items():
                arrays = npz.from_bytes(data)
                joined.setdefault(item, {}).update(self.keyed(name, arrays))
        return {item: npz.to_bytes(arrays) for item, arrays in joined.items()}

    def lane_items(self, ckpt: Any, name: str) -> Any:
        """The checkpoint's per-process items as lane `name` reads them (`items`' inverse)."""
        return ckpt if self._bare else _LaneItems(ckpt, self.prefix(name))

    def alone(self, per_lane: Iterable[T]) -> T | None:
        """The run's one lane's item of `per_lane` (in lane order), or None among several: for
        what one agent and several do differently beyond their layout (whom an evaluation
        plays, which keys it writes; whether the learner waits on one data seam or polls
        several)."""
        items = list(per_lane)
        return items[0] if self._bare else None

    def who(self, name: str) -> str | None:
        """How messages name lane `name`: "agent NAME" among several; None for the run's one
        agent (the message names the run's config instead)."""
        return None if self._bare else f"agent {name}"

    def named(self, name: str) -> str | None:
        """The agent a lane reads of a run it loads from: its own name among several (a
        source of several agents gives its agent of that name); None for one agent (any
        run's one agent)."""
        return None if self._bare else name

    def summary(self, per_lane: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
        """A run summary's lane entries: one agent's at the top level, several under
        `agents`, each with `own` (what only a lane of several reports: its counters)."""
        return dict(per_lane[self.names[0]]) if self._bare else {AGENTS: dict(per_lane)}

    def own(self, entries: Callable[[], Mapping[str, Any]]) -> dict[str, Any]:
        """What a lane reports only as one of several (`entries()`: its own counters and
        digest; one agent's are the run's, and are not computed)."""
        return {} if self._bare else dict(entries())


class _LaneItems:
    """A checkpoint's per-process items as one lane of several sees them: each item holds every
    lane's arrays, keyed "NAME/<key>" (`Layout.items`); `restore_data` gives this lane's."""

    def __init__(self, ckpt: Any, prefix: str):
        self._ckpt, self._prefix = ckpt, prefix

    def latest_step(self) -> int | None:
        return self._ckpt.latest_step()

    def restore_data(self, step: int, item: str = "data") -> bytes | None:
        saved = self._ckpt.restore_data(step, item)
        if saved is None:
            return None
        mine = keys_under(npz.from_bytes(saved), self._prefix)
        return npz.to_bytes(mine) if mine else None
