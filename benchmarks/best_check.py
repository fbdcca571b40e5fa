"""Does a run's `best` hold what it reported? For every seed of a learning sweep's kept runs.

    python benchmarks/learning.py --config configs/impala_cartpole.py --seeds 0-19 \
        --keep-runs /tmp/sweep
    python benchmarks/best_check.py /tmp/sweep --out benchmarks/results/cpu/learning/X_best.json

For each run (`RUNS_ROOT/seed_<N>/`, as `learning.py --keep-runs` leaves them) that reports
reaching its target (`summary.json`'s `env_steps_to_target`), and each of its policies (its
agents, for a run of several):

- `scripts/evaluate.py RUN --step best --episodes E [--agent NAME]` scores fresh episodes (seeded
  apart from the run's own) of the params `checkpoints/best/` holds;
- the best step read is the one the summary names (for a one-agent run, its record is the
  summary's best evaluation);
- that score must be within the evaluation's own noise of what the run recorded for those params
  (the evaluation in the best step's meta, the summary's best for a one-agent run): the two
  means differ by at most Z standard errors of their difference, `|m_run - m_eval| <= Z *
  sqrt(s_run^2 / n_run + s_eval^2 / n_eval)` (Welch; Z = 3 by default, so on 20 seeds of
  correct runs about 0.05 false alarms are expected), or are equal;
- the summary's final evaluation is at or above the target, or the summary says why
  (`final_eval_note`).

Writes one JSON with every seed's numbers and verdicts and the counts, and exits 1 if any
check fails; 2 on a bad argument.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

import provenance  # noqa: E402

from jaxrl_dist.errors import OneLineArgumentParser, UsageError  # noqa: E402


def standard_errors(run: tuple[float, float, int], fresh: tuple[float, float, int]) -> float:
    """How many standard errors of their difference two evaluations' means (mean, std,
    episodes each) are apart: 0 when equal, inf when they differ without noise."""
    (m1, s1, n1), (m2, s2, n2) = run, fresh
    if m1 == m2:
        return 0.0
    se = math.sqrt(s1**2 / n1 + s2**2 / n2)
    return abs(m1 - m2) / se if se else math.inf


def within_noise(run: tuple[float, float, int], fresh: tuple[float, float, int], z: float) -> bool:
    """Whether two evaluations' means differ by at most `z` standard errors of their difference
    (or are equal)."""
    return standard_errors(run, fresh) <= z


def recorded(meta: dict[str, Any], agent: str | None) -> tuple[float, float, int]:
    """(mean, std, episodes) the run recorded for a best step's params (its meta's `eval`)."""
    entry, prefix = meta["eval"], f"{agent}/" if agent else ""
    return entry[prefix + "return"], entry[prefix + "return_std"], entry["episodes"]


def check_run(workdir: str, episodes: int, z: float) -> dict[str, Any]:
    """The checks of one kept run (see the module docstring)."""
    from jaxrl_dist.checkpoints.policy import load_policy

    with open(os.path.join(workdir, "summary.json")) as f:
        summary = json.load(f)
    with open(os.path.join(workdir, "config.json")) as f:
        config = json.load(f)
    target = config.get("stop_at_eval_return")
    final = summary["final_eval_return"]
    out: dict[str, Any] = {
        "workdir": workdir,
        "seed": config["seed"],
        "target": target,
        "reached": summary["env_steps_to_target"] is not None,
        "final_eval_return": final,
        "final_eval_note": summary.get("final_eval_note"),
        "final_ok": target is None
        or final is None
        or final >= target
        or bool(summary.get("final_eval_note")),
        "policies": [],
    }
    if not out["reached"]:
        return out
    names = (
        [a["name"] for a in config.get("agents") or ()]
        if len(config.get("agents") or ()) > 1
        else [None]
    )
    for agent in names:
        policy = load_policy(workdir, "best", agent)
        mine = recorded(policy.meta, agent)
        # The step the summary names as the best is the one read, and (one agent) its record
        # is the summary's best evaluation.
        named = summary["best_checkpoint_step"]
        named = named[agent] if agent else named
        best = summary["best_eval"] or {}
        agrees = named == policy.step and (agent is not None or best.get("return") == mine[0])
        fresh = _evaluate(workdir, episodes, agent)
        out["policies"].append(
            {
                "agent": agent,
                "best_step": policy.step,
                "summary_agrees": agrees,
                "recorded": dict(zip(("mean", "std", "episodes"), mine, strict=True)),
                "evaluated": dict(zip(("mean", "std", "episodes"), fresh, strict=True)),
                "standard_errors": round(standard_errors(mine, fresh), 3),
                "within_noise": within_noise(mine, fresh, z),
            }
        )
    return out


def _evaluate(workdir: str, episodes: int, agent: str | None) -> tuple[float, float, int]:
    """`scripts/evaluate.py RUN --step best` in its own process: (mean, std, episodes)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "eval.json")
        command = [
            sys.executable,
            os.path.join(ROOT, "scripts", "evaluate.py"),
            workdir,
            "--step",
            "best",
            "--episodes",
            str(episodes),
            "--json",
            out,
            *(["--agent", agent] if agent else []),
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            raise RuntimeError(f"evaluate.py failed on {workdir}: {done.stderr.strip()[-500:]}")
        with open(out) as f:
            record = json.load(f)
    return record["return"], record["return_std"], record["episodes"]


def _parser() -> argparse.ArgumentParser:
    parser = OneLineArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs_root", help="learning.py --keep-runs directory (seed_<N>/ runs)")
    parser.add_argument("--episodes", type=int, default=20, help="fresh episodes per policy")
    parser.add_argument("--z", type=float, default=3.0, help="standard errors allowed")
    parser.add_argument("--out", required=True, help="the JSON to write")
    provenance.add_argument(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    runs = sorted(
        (
            os.path.join(args.runs_root, d)
            for d in os.listdir(args.runs_root)
            if d.startswith("seed_")
        )
        if os.path.isdir(args.runs_root)
        else []
    )
    runs = [r for r in runs if os.path.isfile(os.path.join(r, "summary.json"))]
    if not runs or args.episodes <= 0 or args.z <= 0:
        print(
            f"error: {args.runs_root!r} holds no finished runs (seed_<N>/summary.json), or "
            "--episodes/--z is not positive",
            file=sys.stderr,
        )
        return 2
    origin = provenance.capture(args.allow_dirty, devices=False)
    checked = [check_run(r, args.episodes, args.z) for r in runs]
    policies = [p for c in checked for p in c["policies"]]
    result = {
        "runs_root": args.runs_root,
        "episodes": args.episodes,
        "z": args.z,
        "runs": checked,
        "reached": sum(c["reached"] for c in checked),
        "best_within_noise": sum(p["within_noise"] for p in policies),
        "summary_agrees": sum(p["summary_agrees"] for p in policies),
        "best_checked": len(policies),
        "final_ok": sum(c["final_ok"] for c in checked),
        "provenance": origin,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    for c in checked:
        marks = ", ".join(
            f"{p['agent'] or 'best'} {p['recorded']['mean']:.1f} vs {p['evaluated']['mean']:.1f}"
            f"{'' if p['within_noise'] else ' (OUT OF NOISE)'}"
            for p in c["policies"]
        )
        print(f"seed {c['seed']}: final {c['final_eval_return']}, {marks or 'target not reached'}")
    print(
        f"{result['best_within_noise']}/{result['best_checked']} bests within noise "
        f"({result['summary_agrees']} the summary's); "
        f"{result['final_ok']}/{len(checked)} finals at the target or explained; wrote {args.out}"
    )
    checked_all = result["best_checked"]
    ok = result["best_within_noise"] == result["summary_agrees"] == checked_all
    ok = ok and result["final_ok"] == len(checked)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
