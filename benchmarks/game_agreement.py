"""The same params on EnvPool's board-game ports and on their pgx originals (the Anakin runtime's):
do they give the same results?

    python benchmarks/game_agreement.py RUN_DIR [RUN_DIR ...] --games 1000 --repeats 5

For each run's saved policy (tic-tac-toe or connect four, from either runtime) and each
opponent, `--repeats` times with fresh seeds: `--games` games on EnvPool through the Sebulba
evaluator (`evaluation/pools.py`, `SeatedGame`) and as many on pgx through the Anakin evaluator
(`evaluation/jax_envs.py`, `SeatedJaxGame`), greedy, the learner taking each seat in turn. Rows:
each side's return and win/draw/loss rates, the largest gap, and the gap's sampling spread
(two samples of N games differ by about sqrt(var_a / N + var_b / N) by chance alone); then each
(game, opponent) with its repeats pooled. Written to
`benchmarks/results/<device>/game_agreement.json` and `.md`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)

import jax  # noqa: E402
import numpy as np  # noqa: E402
import provenance  # noqa: E402
from throughput import RESULTS, device_dir, environment  # noqa: E402

from jaxrl_dist.checkpoints.policy import load_policy  # noqa: E402
from jaxrl_dist.envs.jax_games import SeatedJaxGame, evaluation_streams  # noqa: E402
from jaxrl_dist.evaluation.base import EvalSetup  # noqa: E402
from jaxrl_dist.evaluation.jax_envs import JaxEvaluator, network_player  # noqa: E402
from jaxrl_dist.evaluation.pools import make_evaluator  # noqa: E402

KEYS = ("return", "win_rate", "draw_rate", "loss_rate")
OPPONENTS = {
    "TicTacToe-v1": ("random", "heuristic", "perfect"),
    "ConnectFour-v1": ("random", "heuristic"),
}


def compare(policy, opponent: str, games: int, seed: int) -> dict:
    core, env_id = policy.agent.actor, policy.env_id
    setup = EvalSetup(env_id, {}, games, seed, core, jax.local_devices()[0])
    sebulba = make_evaluator(setup, num_players=2, opponent=opponent)
    envpool = sebulba.run(policy.params).stats()
    sebulba.close()
    env = SeatedJaxGame(env_id, evaluation_streams(games, opponent), network_player(core))
    params = jax.tree.map(lambda x: np.asarray(x)[None], policy.params)
    pgx = JaxEvaluator(env, core, games, seed).run(params).stats()
    # The return gap's sampling spread: both sides are samples of `games` games.
    spread = float(np.sqrt((envpool["return_std"] ** 2 + pgx["return_std"] ** 2) / games))
    return {
        "envpool": {k: envpool[k] for k in KEYS},
        "pgx": {k: pgx[k] for k in KEYS},
        "gap": max(abs(envpool[k] - pgx[k]) for k in KEYS),
        "return_gap_spread": spread,
    }


def pooled(rows: list[dict]) -> list[dict]:
    """Each (game, opponent)'s repeats pooled: the means over every repeat's games."""
    out = []
    for key in sorted({(r["env_id"], r["opponent"]) for r in rows}):
        mine = [r for r in rows if (r["env_id"], r["opponent"]) == key]
        side = {
            s: {k: float(np.mean([r[s][k] for r in mine])) for k in KEYS}
            for s in ("envpool", "pgx")
        }
        spread = float(np.sqrt(np.sum([r["return_gap_spread"] ** 2 for r in mine])) / len(mine))
        out.append(
            {
                "env_id": key[0],
                "opponent": key[1],
                "repeats": len(mine),
                **side,
                "gap": max(abs(side["envpool"][k] - side["pgx"][k]) for k in KEYS),
                "return_gap_spread": spread,
            }
        )
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="work dirs of tic-tac-toe or connect four runs")
    parser.add_argument("--games", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out-dir", default=None)
    provenance.add_argument(parser)
    args = parser.parse_args(argv)
    origin = provenance.capture(args.allow_dirty)  # each run's own config is in its work dir
    rows = []
    for run in args.runs:
        policy = load_policy(run)
        for opponent in OPPONENTS[policy.env_id]:
            for r in range(args.repeats):
                row = compare(policy, opponent, args.games, seed=1000 + r)
                rows.append(
                    {
                        "run": os.path.relpath(run, ROOT) if run.startswith(ROOT) else run,
                        "env_id": policy.env_id,
                        "step": policy.step,
                        "opponent": opponent,
                        "seed": 1000 + r,
                        **row,
                    }
                )
                print(
                    f"{policy.env_id} vs {opponent} seed {1000 + r}: gap {row['gap']:.3f} "
                    f"(return {row['envpool']['return']:.3f} / {row['pgx']['return']:.3f})"
                )
    out = args.out_dir or os.path.join(RESULTS, device_dir())
    os.makedirs(out, exist_ok=True)
    result = {
        "games": args.games,
        "repeats": args.repeats,
        "environment": environment(),
        "provenance": origin,
        "rows": rows,
        "pooled": pooled(rows),
        "largest_gap": max(r["gap"] for r in rows),
    }
    with open(os.path.join(out, "game_agreement.json"), "w") as f:
        json.dump(result, f, indent=2)
    lines = [
        f"# The same params on EnvPool's ports and on pgx ({args.games} games each)",
        "",
        "| game | opponent | seed | return EnvPool | return pgx | win EnvPool | win pgx "
        "| largest gap | sampling sd of the return gap |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows + result["pooled"]:
        e, p = r["envpool"], r["pgx"]
        seed = r.get("seed", f"all {r.get('repeats')} pooled")
        lines.append(
            f"| {r['env_id']} | {r['opponent']} | {seed} | {e['return']:.3f} | "
            f"{p['return']:.3f} | {e['win_rate']:.3f} | {p['win_rate']:.3f} | "
            f"{r['gap']:.3f} | {r['return_gap_spread']:.3f} |"
        )
    lines += [
        "",
        f"Largest gap over the single rows: {result['largest_gap']:.3f}; over the "
        f"pooled rows: {max(r['gap'] for r in result['pooled']):.3f}.",
    ]
    with open(os.path.join(out, "game_agreement.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"largest gap {result['largest_gap']:.3f}; wrote {out}/game_agreement.{{json,md}}")


if __name__ == "__main__":
    main()
