"""A seated game's pool gathered game by game (synchronous collection in seats, `gather=True`:
one EnvPool `recv()` per game) beside a synchronous pool of every game: learner steps per
second through `SeatedGame` alone, a scripted learner (no inference), interleaved; the
gathered pool on one EnvPool thread (as a run makes it) and on a thread per game.

    python benchmarks/seated_gather.py [--games 32] [--rounds 3000] [--pairs 5]

Writes `benchmarks/results/cpu/seated_gather.json` (each pair's two rates, their ratio's
median, the load average).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np
import provenance

from jaxrl_dist.envs import games as g
from jaxrl_dist.envs import make_env
from jaxrl_dist.envs.seats import LEARNER, SeatedGame, same_roles
from jaxrl_dist.types import AGENT_VIEW

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "results", "cpu", "seated_gather.json")
ENV_ID = "TicTacToe-v1"


def learner_steps_per_s(gather: bool, games: int, rounds: int, threads: int = 0) -> float:
    """`threads`: EnvPool's (0: `make_env`'s default, one per env of a recv's batch: every
    game for the synchronous pool, one for the gathered pool, as a run makes it)."""
    pool = make_env(ENV_ID, {}, games, 1 if gather else games, seed=4, num_threads=threads)
    opponent = {"random": g.random_legal(np.random.default_rng(5))}
    env = SeatedGame(pool, same_roles(games, (LEARNER, "random")), opponent, gather=gather)
    policy = g.random_legal(np.random.default_rng(6))
    env.async_reset()
    steps, start = 0, time.perf_counter()
    for _ in range(rounds):
        obs, *_, info = env.recv()
        steps += len(info["env_id"])
        env.send(policy.act(obs[AGENT_VIEW], info["legal_action_mask"], None), info["env_id"])
    seconds = time.perf_counter() - start
    env.close()
    return steps / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3000)
    parser.add_argument("--pairs", type=int, default=5)
    provenance.add_argument(parser)
    args = parser.parse_args()
    origin = provenance.capture(args.allow_dirty, devices=False)
    pairs = []
    for _ in range(args.pairs):
        synced = learner_steps_per_s(False, args.games, args.rounds)
        gathered = learner_steps_per_s(True, args.games, args.rounds)
        many = learner_steps_per_s(True, args.games, args.rounds, threads=args.games)
        pairs.append(
            {
                "synchronous": round(synced),
                "gathered": round(gathered),
                "gathered_thread_per_game": round(many),
            }
        )
        print(pairs[-1], flush=True)
    ratios = [p["gathered"] / p["synchronous"] for p in pairs]
    many = [p["gathered_thread_per_game"] / p["synchronous"] for p in pairs]
    result = {
        "env_id": ENV_ID,
        "games": args.games,
        "rounds": args.rounds,
        "pairs": pairs,
        "gathered_over_synchronous_median": round(statistics.median(ratios), 3),
        "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)],
        "thread_per_game_over_synchronous_median": round(statistics.median(many), 3),
        "load_average_1min": os.getloadavg()[0],
        "provenance": origin,
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(result, f, indent=1)
    print(f"gathered / synchronous: {result['gathered_over_synchronous_median']} -> {OUT}")


if __name__ == "__main__":
    main()
