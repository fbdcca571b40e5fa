"""`scripts/evaluate.py`: evaluate a run's checkpoint, record a GIF, or follow a run as it trains.

    python scripts/evaluate.py RUN_DIR [--step latest|best|N] [--episodes 10] [--envs E]
        [--mode greedy|sampled] [--seed S] [--json OUT.json] [--video OUT.gif]
    python scripts/evaluate.py RUN_DIR --follow [--poll_s 5] [--idle_exit_s 1800]

One evaluation is `jaxrl_dist.evaluate` (`tools/evaluation.py`): `--episodes` episodes on
fresh envs (`--envs`; by default one each, its first), seeded by default with the run's seed +
`SEED_OFFSET`, so they are not the episodes the run's own evaluations played. It prints a
table row and writes JSON (default `RUN_DIR/eval/step_<N>_<mode>.json`, `best_<N>_...` for
`--step best`) with the per-episode
returns. `--follow` evaluates each new
checkpoint of a run while it trains and appends one JSON line per step to
`RUN_DIR/validation.jsonl`; it stops when the run writes its `summary.json`, or after
`--idle_exit_s` seconds without a new checkpoint (default 1800, 30 minutes: a run that died
never writes its summary; `--idle_exit_s 0` waits until the run ends, however long). Bad input
prints one `error: ...` line and exits 2, before anything is written.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import logging
import os
import sys
import time
from typing import Any

from jaxrl_dist.checkpoints.policy import (
    STEP_CHOICES,
    Policy,
    StepGoneError,
    checkpoint_dir,
    list_steps,
    load_policy_at,
    locate_step,
)
from jaxrl_dist.envs.games import tictactoe_exact_losses
from jaxrl_dist.envs.seats import AGENT_ROLE
from jaxrl_dist.errors import OneLineArgumentParser, UsageError
from jaxrl_dist.evaluation.opponents import NAMES as OPPONENT_NAMES
from jaxrl_dist.evaluation.opponents import is_opponent_name
from jaxrl_dist.evaluation.video import (
    VIDEO_MAX_FRAMES,
    pillow_problem,
    record_video,
    render_problem,
)
from jaxrl_dist.tools.evaluation import MODES, SEED_OFFSET, Evaluation, evaluate

# A run deletes old steps while --follow reads; Orbax then warns of a step's missing metadata
# file. jaxrl_dist.checkpoints.policy retries or skips that step: the warning is noise here.
logging.getLogger("absl").addFilter(
    lambda record: "Metadata file does not exist" not in record.getMessage()
)

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
FOLLOW_IDLE_EXIT_S = 1800.0  # --follow's default: a run that died writes no summary.json
TABLE_HEADER = (
    f"{'step':>8} {'env_steps':>12} {'episodes':>8} {'return (mean ± std)':>21} "
    f"{'min':>9} {'max':>9} {'length':>8}"
)


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Parses and checks the flags that need no file access; raises UsageError."""
    p = OneLineArgumentParser(
        prog="evaluate.py", description="Evaluate a jaxrl_dist run's checkpoints."
    )
    p.add_argument("run_dir", help="a run's work dir (or its checkpoints dir)")
    p.add_argument("--step", help="latest (default), best or a step number")
    p.add_argument("--agent", help="the agent to evaluate, of a run of several (config.agents)")
    p.add_argument("--episodes", type=int, default=10, help="episodes")
    p.add_argument(
        "--envs", type=int, default=0, help="envs that play them (default 0: one per episode)"
    )
    p.add_argument("--mode", default="greedy", help="greedy or sampled actions")
    p.add_argument("--seed", type=int, help=f"env seed (default: the run's + {SEED_OFFSET})")
    p.add_argument(
        "--json",
        help="output file (default RUN_DIR/eval/step_<N>_<mode>.json; best_<N>_... for best)",
    )
    p.add_argument("--video", help="also record one episode to this .gif")
    p.add_argument(
        "--opponent",
        help="turn-based games: random, heuristic, perfect, checkpoint:PATH[@STEP] "
        "(another run's greedy policy) or pool:ID|latest (a snapshot of the evaluated "
        "checkpoint's opponent pool) or agent:NAME (another agent of the evaluated step, of a "
        "run of several), the learner taking each seat in turn (default: the run's "
        "config.seats.eval_opponent)",
    )
    p.add_argument(
        "--eval_env_id",
        help="evaluate on this env (default: the run's evaluation env, config.eval_env_id, or "
        "its training env); the policy must take its spaces",
    )
    p.add_argument(
        "--eval_env_kwargs",
        help="kwargs as a Python dict, e.g. \"{'reward_clip': False}\": with --eval_env_id that "
        "env's; without, over the policy's training env's own (default: the run's evaluation env)",
    )
    p.add_argument("--follow", action="store_true", help="evaluate new checkpoints as they come")
    p.add_argument("--poll_s", type=float, default=5.0, help="--follow: seconds between looks")
    p.add_argument(
        "--idle_exit_s",
        type=float,
        default=FOLLOW_IDLE_EXIT_S,
        help=f"--follow: stop after this many seconds without a new checkpoint (default "
        f"{FOLLOW_IDLE_EXIT_S:g}, 30 minutes: a run that died never writes its summary.json); "
        "0: wait until the run finishes, however long",
    )
    args = p.parse_args(argv)
    if args.mode not in MODES:
        raise UsageError(f"--mode {args.mode!r}: choose greedy or sampled")
    if args.episodes <= 0:
        raise UsageError(f"--episodes {args.episodes}: must be > 0")
    if not 0 <= args.envs <= args.episodes:
        raise UsageError(f"--envs {args.envs}: give 0 (one per episode) to --episodes")
    if args.seed is not None and not 0 <= args.seed < 2**32:
        raise UsageError(f"--seed {args.seed}: must be in [0, 2**32)")
    if args.step is not None and args.step not in STEP_CHOICES and not args.step.isdigit():
        raise UsageError(f"--step {args.step!r}: give latest, best or a step number")
    if args.video is not None and not args.video.lower().endswith(".gif"):
        raise UsageError(f"--video {args.video!r}: only animated GIFs are written; name a .gif")
    agent = args.opponent is not None and args.opponent.startswith(AGENT_ROLE)
    if args.opponent is not None and not (is_opponent_name(args.opponent) or agent):
        raise UsageError(f"--opponent {args.opponent!r}: choose {OPPONENT_NAMES}")
    if args.eval_env_kwargs is not None:
        args.eval_env_kwargs = _literal_dict("--eval_env_kwargs", args.eval_env_kwargs)
    if args.poll_s <= 0 or args.idle_exit_s < 0:
        raise UsageError("--poll_s must be > 0 and --idle_exit_s >= 0")
    if args.follow:
        given = [f for f in ("step", "json", "video") if getattr(args, f) is not None]
        if given:
            raise UsageError(
                "--follow evaluates every new step into RUN_DIR/validation.jsonl; "
                f"drop --{given[0]}"
            )
    return args


def _literal_dict(flag: str, text: str) -> dict[str, Any]:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        value = None
    if not isinstance(value, dict):
        raise UsageError(f"{flag} {text!r}: give a Python dict, e.g. \"{{'size': 9}}\"")
    return value


def run_dir_of(path: str, ckpt_dir: str) -> str:
    """The run's work dir: `path` itself, or the parent of a checkpoints dir given directly."""
    if ckpt_dir == os.path.join(path, "checkpoints"):
        return path
    return os.path.dirname(os.path.abspath(ckpt_dir))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = parse_args(argv)
        if args.follow:
            return follow(args)
        return evaluate_once(args)
    except (UsageError, ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("error: interrupted (what was written so far is kept)", file=sys.stderr)
        return EXIT_INTERRUPTED


# ------------------------------------------------------------------------------- one step
def evaluate_once(args: argparse.Namespace) -> int:
    """Evaluates one checkpoint (and records a video): prints the table, writes the JSON."""
    ckpt_dir = checkpoint_dir(args.run_dir)
    # "latest" is the newest intact step: a damaged newer one is named on stderr and in the JSON
    notes: list[str] = []
    located = locate_step(args.run_dir, args.step or "latest", args.agent, warn=notes.append)
    policy = load_policy_at(*located, args.agent)
    for line in notes:
        print(f"warning: {line}", file=sys.stderr)
    if args.video is not None:  # before anything is evaluated or written
        problem = pillow_problem() or render_problem(policy.env_id, policy.env_kwargs)
        if problem:
            raise ValueError(problem)
    result = _evaluate(policy, args)
    record = result.record()
    record.update(exact_losses(policy, record))
    if notes:
        record["checkpoint_note"] = notes[0]
    print(TABLE_HEADER)
    print(table_row(record), flush=True)
    if "exact_loss_rate" in record:
        print(
            "exact losses against perfect play: first {exact_loss_first:.4f}, second "
            "{exact_loss_second:.4f}, mean {exact_loss_rate:.4f}".format(**record)
        )
    if args.video is not None:
        record["video"] = record_video(policy, args.video, args.mode == "greedy", result.seed)
        v = record["video"]
        cut = f", cut at {VIDEO_MAX_FRAMES} frames" if v["cut"] else ""
        print(f"video: {args.video} ({v['frames']} frames, return {v['return']:.1f}{cut})")
    # Another env than the run's evaluation env gets a file of its own (named by a digest).
    env = (result.env_id, result.env_kwargs)
    other = env != policy.run_eval_env
    tag = "_env" + hashlib.sha256(repr(env).encode()).hexdigest()[:8] if other else ""
    kind = "best" if args.step == "best" else "step"  # a best step is in checkpoints/best/
    out = args.json or os.path.join(
        run_dir_of(args.run_dir, ckpt_dir), "eval", f"{kind}_{policy.step}_{args.mode}{tag}.json"
    )
    _write_json(out, record)
    print(f"wrote {out}")
    return 0


def _evaluate(policy: Policy, args: argparse.Namespace) -> Evaluation:
    """`jaxrl_dist.evaluate` of `policy` as the flags ask."""
    return evaluate(
        policy,
        args.episodes,
        env_id=args.eval_env_id,
        env_kwargs=args.eval_env_kwargs,
        opponent=args.opponent,
        mode=args.mode,
        seed=args.seed,
        envs=args.envs,
    )


def exact_losses(policy: Policy, record: dict[str, Any]) -> dict[str, float]:
    """A greedy tic-tac-toe policy against perfect play: also its exact loss probability as
    first and as second player, and their mean (`games.tictactoe_exact_losses`), beside the
    sampled games. Not for a recurrent policy: its move depends on the game so far, not on the
    position alone, so the per-position table this walks does not describe it (the sampled
    games stand alone)."""
    if (policy.env_id, record.get("opponent"), record["mode"]) != (
        "TicTacToe-v1",
        "perfect",
        "greedy",
    ) or policy.recurrent:
        return {}
    first, second = tictactoe_exact_losses(
        lambda views, legal: policy.act(views, greedy=True, action_mask=legal)
    )
    return {
        "exact_loss_first": first,
        "exact_loss_second": second,
        "exact_loss_rate": (first + second) / 2,
    }


def table_row(record: dict[str, Any]) -> str:
    env_steps = record["env_steps"]
    env_steps = "?" if env_steps is None else f"{env_steps:,}"
    return (
        f"{record['step']:>8} {env_steps:>12} {record['episodes']:>8} "
        f"{record['return']:>11.1f} ± {record['return_std']:>7.1f} "
        f"{record['return_min']:>9.1f} {record['return_max']:>9.1f} {record['length']:>8.1f}"
    )


def _write_json(path: str, record: dict[str, Any]) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(record, f, indent=2)


# ------------------------------------------------------------------------------- follow
def _wait(seconds: float) -> None:
    time.sleep(seconds)  # a function of its own, so a test can step the follower


def run_finished(run_dir: str) -> bool:
    """Whether the run has ended: its `summary.json` is written at every end and its
    `config.json` at every start (a resume too), so a summary older than the config is that of
    an earlier, resumed part of the run."""
    summary, config = (os.path.join(run_dir, name) for name in ("summary.json", "config.json"))
    if not os.path.exists(summary):
        return False
    return not os.path.exists(config) or os.path.getmtime(summary) >= os.path.getmtime(config)


def follow(args: argparse.Namespace) -> int:
    """Evaluates each new checkpoint of a run as it appears, in step order, skipping to the
    newest when more than one came since the last look. Stops when the run's `summary.json`
    exists and every step then present was considered, or after `--idle_exit_s` without a new
    step."""
    path = args.run_dir
    if not os.path.isdir(path):
        raise FileNotFoundError(f"{path!r} is not a directory; give a run's work dir")
    ckpt_dir = _follow_checkpoint_dir(path)
    run_dir = run_dir_of(path, ckpt_dir)
    out = os.path.join(run_dir, "validation.jsonl")
    last, evaluated = -1, 0  # the newest step considered (evaluated, skipped or gone)
    last_new = time.monotonic()
    _say(f"following {ckpt_dir}; results go to {out}")
    _say(TABLE_HEADER)
    while True:
        # Looked at before listing: the run writes its last checkpoint before its summary, so
        # once the summary exists the listing holds every step the run will have.
        finished = run_finished(run_dir)
        new = [s for s in list_steps(ckpt_dir) if s > last]
        if new:
            target, skipped = new[-1], new[:-1]
            last, last_new = target, time.monotonic()
            if skipped:
                _say(f"note: skipped steps {_steps(skipped)} (behind: evaluating the newest)")
            record = _follow_step(ckpt_dir, target, args)
            if record is not None:
                record["skipped"] = skipped
                with open(out, "a") as f:
                    f.write(json.dumps(record) + "\n")
                evaluated += 1
                last_new = time.monotonic()  # idle time starts after the evaluation
            continue  # look again at once: new steps may have come while evaluating
        if finished:
            _say(f"note: the run finished; evaluated {evaluated} step(s)")
            return 0
        if args.idle_exit_s and time.monotonic() - last_new >= args.idle_exit_s:
            _say(
                f"note: no new checkpoint in {args.idle_exit_s:g} s; evaluated {evaluated} step(s) "
                "(--idle_exit_s 0 waits until the run ends)"
            )
            return 0
        _wait(args.poll_s)


def _follow_checkpoint_dir(path: str) -> str:
    """`checkpoint_dir(path)` once the run has one; before its first save, `path/checkpoints`."""
    try:
        return checkpoint_dir(path)
    except FileNotFoundError:
        return os.path.join(path, "checkpoints")


def _follow_step(ckpt_dir: str, step: int, args: argparse.Namespace) -> dict[str, Any] | None:
    """Evaluates one step for --follow: its record, or None with a note if it was deleted
    (a run keeps only its newest checkpoints) before it could be read."""
    try:
        policy = load_policy_at(ckpt_dir, step, args.agent)
    except StepGoneError:
        _say(f"note: step {step} was deleted before it could be read (retention); skipped")
        return None
    except ValueError as e:  # a damaged step must not end the validation of the others
        _say(f"note: {e}; skipped")
        return None
    record = _evaluate(policy, args).record()
    _say(table_row(record))
    return record


def _steps(steps: list[int]) -> str:
    return ", ".join(map(str, steps))


def _say(line: str) -> None:
    print(line, flush=True)  # at once, also into a pipe or a log file
