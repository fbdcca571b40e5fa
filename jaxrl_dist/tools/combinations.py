"""What combines: every set-up the library ships (a config) against every lever a user adds,
probed through the run's own checks, written as the docs' table.

A probe builds `Trainer(config)` (every check a run makes before it writes anything: the
config's, the engine's, the agent's, the data flow's) and records whether it is accepted or
the one line it is refused with; nothing is trained and nothing is written. The table in
`docs/guides/what-combines.md` is this module's output, and `tests/test_what_combines.py`
probes again and fails when the two disagree, so the page cannot drift from the checks.

    python -m jaxrl_dist.tools.combinations --write docs/guides/what-combines.md

A refusal that says "yet" is work not done; any other names the reason the pair cannot be
(the XLA actor loop steps EnvPool's C++ envs inside XLA, so it cannot step a Python one).
"""

from __future__ import annotations

import argparse
import copy
import math
import os
import re
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

import flax.linen as nn

from jaxrl_dist.config import ConfigError
from jaxrl_dist.config.cli import _build, load_config_file

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ACCEPTED = "yes"
NOT_APPLICABLE = "n/a"
PROBE_TORSO = "what_combines_probe"  # a registered user torso (`register_torso`)
PROBE_CORE = "what_combines_probe"  # a registered user cell (`register_core`): flax's MGU
PROBE_HEAD = "what_combines_probe"  # a registered user head (`register_head`): one Dense layer
Q_AGENTS = ("rainbow", "r2d2")  # their shipped heads' options a head of the user's replaces
ACTOR_CRITICS = ("impala", "ppo")


@dataclass(frozen=True)
class SetUp:
    """A row: a shipped config (its `:quick` variant) and what it shows."""

    name: str
    config: str
    runtime: str


@dataclass(frozen=True)
class Lever:
    """A column: what a user adds to a set-up (`apply(raw) -> raw`, the config's nested dict;
    None where the lever means nothing on that set-up) and the engines that have it."""

    name: str
    apply: Callable[[dict], dict | None]
    runtimes: tuple[str, ...] = ("sebulba", "anakin")


def _agents(raw: dict) -> list[dict]:
    """The config's agents (several, or the run itself as one)."""
    return list(raw.get("agents") or ()) or [raw]


def _networks(raw: dict, change: dict, only: tuple[str, ...] = ()) -> dict:
    """`change` in the network of every agent (of the algorithms `only`, when one has them)."""
    raw = copy.deepcopy(raw)
    agents = _agents(raw)
    chosen = [a for a in agents if a.get("algorithm", "impala") in only] if only else agents
    for agent in chosen or agents:
        agent["network"] = {**agent.get("network", {}), **change}
    if raw.get("agents"):
        raw["agents"] = tuple(agents)
    return raw


def _own_head(raw: dict) -> dict:
    """The probe head on every agent; the Q agents' dueling and noisy layers off (the user's
    head builds what it wants, as the guide says)."""
    raw = _networks(raw, {"head": PROBE_HEAD})
    for agent in _agents(raw):
        if agent.get("algorithm", "impala") in Q_AGENTS:
            off = {"dueling": False, "noisy": False} if agent["algorithm"] == "rainbow" else {}
            agent["algo"] = {**agent.get("algo", {}), "dueling": False, **off}
    return raw


def _fields(**sections: dict) -> Callable[[dict], dict]:
    def apply(raw: dict) -> dict:
        raw = copy.deepcopy(raw)
        for section, values in sections.items():
            if isinstance(values, dict):
                raw[section] = {**raw.get(section, {}), **values}
            else:
                raw[section] = values
        return raw

    return apply


def _deterministic(raw: dict) -> dict:
    raw = _fields(deterministic=True)(raw)
    if raw.get("runtime", "sebulba") == "sebulba":
        raw["sebulba"] = {**raw.get("sebulba", {}), "async_envs": False}
    return raw


SETUPS = (
    SetUp("IMPALA on CartPole", "impala_cartpole.py", "sebulba"),
    SetUp("Rainbow (replay)", "rainbow_cartpole.py", "sebulba"),
    SetUp("PPO with an LSTM (memory task)", "ppo_lstm_memory.py", "sebulba"),
    SetUp("R2D2 (sequence replay)", "r2d2_memory.py", "sebulba"),
    SetUp("SAC (continuous actions, replay)", "sac_pendulum.py", "sebulba"),
    SetUp("TD3 (continuous actions, replay)", "td3_pendulum.py", "sebulba"),
    SetUp("Seats in a board game (PPO, tic-tac-toe)", "ppo_tictactoe.py", "sebulba"),
    SetUp("Seats, a replay agent (Rainbow, tic-tac-toe)", "rainbow_tictactoe.py", "sebulba"),
    SetUp("Agents per env (PPO, foraging)", "ppo_foraging.py", "sebulba"),
    SetUp("Several agents in a game (Rainbow + PPO)", "two_agents_tictactoe.py", "sebulba"),
    SetUp("Several agents' slots (foraging)", "two_agents_foraging.py", "sebulba"),
    SetUp("Anakin PPO on CartPole", "anakin_ppo_cartpole.py", "anakin"),
    SetUp("Anakin Rainbow (device replay)", "anakin_rainbow_cartpole.py", "anakin"),
    SetUp("Anakin R2D2 (device sequence replay)", "anakin_r2d2_memory.py", "anakin"),
    SetUp("Anakin SAC (device replay)", "anakin_sac_pendulum.py", "anakin"),
    SetUp("Anakin TD3 (device replay)", "anakin_td3_pendulum.py", "anakin"),
    SetUp("Anakin IPPO on JaxMARL's MPE", "anakin_ippo_mpe_spread.py", "anakin"),
    SetUp("Anakin seats (PPO, tic-tac-toe)", "anakin_ppo_tictactoe.py", "anakin"),
    SetUp("Anakin several agents (Rainbow + PPO)", "anakin_two_agents_tictactoe.py", "anakin"),
)


def _greedy_learner(raw: dict) -> dict | None:
    """A learner acting by its policy's mode while it learns: seat 1 of a one-agent game
    (`seats.exploration_mask`), or the first of several agents (`exploration_mask`)."""
    raw = copy.deepcopy(raw)
    if raw.get("agents"):
        raw["exploration_mask"] = (False,) + (True,) * (len(raw["agents"]) - 1)
    elif raw.get("seats", {}).get("games"):
        raw["seats"] = {**raw["seats"], "exploration_mask": (True, False)}
    else:
        return None
    return raw


LEVERS = (
    Lever(
        "LSTM core",
        lambda raw: _networks(raw, {"core": "lstm", "core_size": 32}, ACTOR_CRITICS),
    ),
    Lever("your own torso", lambda raw: _networks(raw, {"torso": PROBE_TORSO})),
    Lever(
        "your own core",
        lambda raw: _networks(raw, {"core": PROBE_CORE, "core_size": 32}, ACTOR_CRITICS),
    ),
    Lever("your own heads", _own_head),
    Lever("LayerNorm", lambda raw: _networks(raw, {"layer_norm": True})),
    Lever("deterministic", _deterministic),
    Lever("greedy while learning", _greedy_learner),
    # Both step every env of an actor together: a sync EnvPool (`async_envs=False`).
    Lever(
        "XLA actor loop",
        _fields(sebulba={"actor_loop": "xla", "async_envs": False}),
        ("sebulba",),
    ),
    Lever(
        "sync collection",
        _fields(sebulba={"sync_collection": True, "async_envs": False}),
        ("sebulba",),
    ),
    Lever("inference server", _fields(sebulba={"inference": {"client": "server"}}), ("sebulba",)),
)


class _ProbeTorso(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.relu(nn.Dense(16)(x.reshape(x.shape[0], -1).astype("float32")))


class _ProbeHead(nn.Module):
    outputs: tuple[int, ...]

    @nn.compact
    def __call__(self, x):
        return nn.Dense(math.prod(self.outputs))(x).reshape(x.shape[0], *self.outputs)


def _register_probes() -> None:
    """The probe torso, core and head, registered in this process (again: the same
    factories)."""
    from jaxrl_dist.networks import register_core, register_head, register_torso

    register_torso(PROBE_TORSO, lambda spec: _ProbeTorso())
    register_core(PROBE_CORE, lambda spec: nn.MGUCell(spec.core_size))
    register_head(PROBE_HEAD, lambda spec: _ProbeHead(spec.outputs))


def probe(raw: dict) -> str:
    """ACCEPTED, or the one line the run's checks refuse `raw` with. A refusal that gives the
    value to set ("fix it with config.batch_size=32": a size the lever asks for) is followed,
    as a user would, and the pair probed again."""
    from jaxrl_dist.run.trainer import Trainer

    overrides: dict[str, str] = {}
    while True:
        try:
            config = _build(raw, overrides)
            with tempfile.TemporaryDirectory() as tmp:
                Trainer(config, os.path.join(tmp, "run"), quiet=True)
        except (ConfigError, ValueError) as e:
            line = str(e).splitlines()[0]
            fix = re.search(r"fix it with config\.([\w.]+)=(\S+)$", line)
            if fix is None or fix.group(1) in overrides:
                return line
            overrides[fix.group(1)] = fix.group(2)
            continue
        return ACCEPTED


def table() -> dict[str, dict[str, str]]:
    """`{set-up: {lever: ACCEPTED | NOT_APPLICABLE | the refusal}}`."""
    _register_probes()
    return {setup.name: table_row(setup) for setup in SETUPS}


def table_row(setup: SetUp) -> dict[str, str]:
    """`{lever: ACCEPTED | NOT_APPLICABLE | the refusal}` of one set-up (the probes
    registered)."""
    raw = load_config_file(os.path.join(ROOT, "configs", setup.config) + ":quick")
    row = {}
    for lever in LEVERS:
        changed = lever.apply(raw) if setup.runtime in lever.runtimes else None
        row[lever.name] = NOT_APPLICABLE if changed is None else probe(changed)
    return row


def counts(cells: dict[str, dict[str, str]]) -> dict[str, int]:
    """Accepted pairs, refusals of work not done ("yet"), and refusals with a reason."""
    flat = [c for row in cells.values() for c in row.values() if c != NOT_APPLICABLE]
    refused = [c for c in flat if c != ACCEPTED]
    not_yet = [c for c in refused if " yet" in c]
    return {
        "pairs": len(flat),
        "accepted": len(flat) - len(refused),
        "not_yet": len(not_yet),
        "kept": len(refused) - len(not_yet),
    }


def markdown(cells: dict[str, dict[str, str]]) -> str:
    """The docs page: the table (numbers name the refusals listed under it) and the counts."""
    levers = [lever.name for lever in LEVERS]
    reasons: list[str] = []
    lines = [
        "| set-up | " + " | ".join(levers) + " |",
        "|---|" + "---|" * len(levers),
    ]
    for setup, row in cells.items():
        marks = []
        for lever in levers:
            cell = row[lever]
            if cell in (ACCEPTED, NOT_APPLICABLE):
                marks.append(cell)
                continue
            if cell not in reasons:
                reasons.append(cell)
            marks.append(f"no ({reasons.index(cell) + 1})")
        lines.append(f"| {setup} | " + " | ".join(marks) + " |")
    n = counts(cells)
    refusals = [f"{i}. {reason}" for i, reason in enumerate(reasons, 1)]
    return "\n".join(
        [
            HEADER,
            *lines,
            "",
            f"{n['pairs']} pairs: {n['accepted']} accepted, {n['not_yet']} refused as not done "
            f"yet, {n['kept']} refused for a reason of the pair itself.",
            "",
            "The refusals, as a run prints them:",
            "",
            *refusals,
            "",
        ]
    )


HEADER = """# What combines

Every set-up the library ships (a config's `:quick` variant, a row) with each lever a user
adds (a column), probed through the run's own checks: `Trainer(config)` makes every check a run
makes before it writes anything (nothing is trained here), so "yes" means the checks let the
run start and "no" is the one line it is refused with, numbered below. Where a refusal gives
the value to set instead (deterministic mode and synchronous collection ask for
`config.batch_size` = one unroll of every actor's streams), the probe sets it, as a user
would, and asks again. "n/a": the engine has no such lever (Anakin has no actor loop,
collection mode or inference server: one jitted program steps and learns), or the set-up has
nothing it applies to ("greedy while learning" is seat 1 of a one-agent game, or the first of
several agents, acting by its policy's mode while it learns). An LSTM goes on the
actor-critic agents of a set-up (a Rainbow agent's recurrent form is R2D2), and so does "your
own core", a flax recurrent cell given to `register_core` (flax's MGU cell here); "your own
torso" is a flax module given to `register_torso`, "your own heads" one given to
`register_head` for every head of every agent (a Q agent's dueling and noisy layers, parts of
its shipped head, turned off: `docs/guides/your-own-network.md`).

Generated by `python -m jaxrl_dist.tools.combinations --write docs/guides/what-combines.md`;
`tests/test_what_combines.py` probes again and fails when this page and the checks disagree.
A refusal that says "yet" is work not done; any other names the reason the pair cannot be.
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", help="the page to write (default: print it)")
    args = parser.parse_args(argv)
    page = markdown(table())
    if args.write:
        with open(args.write, "w") as f:
            f.write(page)
    else:
        sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
