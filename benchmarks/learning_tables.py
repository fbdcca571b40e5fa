"""The learning figures of the README and `docs/results/` (and any other figure marked as a
results file's value), generated from the results files they cite, so a page cannot drift from
its files.

    python benchmarks/learning_tables.py            # rewrite the generated parts of the pages
    python benchmarks/learning_tables.py --check    # exit 1 (and name them) if a page differs

A page marks what is generated; everything between a marker and its end is rewritten. Files are
named by their path under `benchmarks/results/cpu/learning/` without `.json`; `NAME@T` reads the
sweep judged again at target T (`restate_learning.py --at-target T`).

    <!-- learning-table
    columns: config | condition          (the label columns; optional)
    target: 475                          (every row must be judged at it; optional)
    metrics: mean advantage=losses/advantage_mean:+ | value=losses/value_mean:p90  (optional)
    each seed: yes                       (a column of every seed's last evaluation; optional)
    impala_cartpole | `impala_cartpole.py` | quiet
    -->

    (the table: the labels, seeds crossing the target (first crossing), env steps to it (median,
    IQR; IQM, 95% CI), seconds to it, seeds holding it at their last evaluation, the last
    evaluation's IQM (95% CI), optional metric medians, the file and its commit)

    <!-- /learning-table -->

    <!-- learning-compare               (rows: NAME_A | NAME_B | labels)
    ... -->  ... <!-- /learning-compare -->  (A and B side by side, P(A > B) on the last evaluation)

    <!-- learning: quiet=impala_cartpole; load 1=impala_cartpole_load1 -->...<!-- /learning -->
    (inline, in a sentence or a table cell: each sweep's crossing, holding and IQM in words)

    <!-- learning-p: NAME_A > NAME_B -->...<!-- /learning-p -->
    (inline: the probability that a seed of A ends above a seed of B, with its interval)

    <!-- figure: cpu/NAME.json KEY.PATH {:.2f} -->...<!-- /figure -->
    (inline: one value of any results file under benchmarks/results/, formatted)

    <!-- best: quiet=NAME; load 1=NAME -->...<!-- /best -->
    (inline: how many bests, scored again by `scripts/evaluate.py --step best`, were within
    the noise of the evaluation the run recorded)

    <!-- best-check                       (rows: NAME | labels; files of `best_check.py` in
    impala_cartpole_issue55 | quiet        benchmarks/results/cpu/best_check/)
    -->  ... <!-- /best-check -->
    (per sweep: the seeds that reached the target, their bests scored again within the
    evaluation's noise, the largest difference in standard errors, the finals at or above the
    stop line or explained)

    <!-- published-table: cpu/published/mujoco_v4.json -->  ...  <!-- /published-table -->
    (sweeps beside published figures: `published.py`'s table of that results file)
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import published  # noqa: E402
from learning_report import at_target, iqm_text, is_small, number  # noqa: E402
from seed_statistics import improvement_ci, probability_of_improvement  # noqa: E402

RESULTS = os.path.join(HERE, "results", "cpu", "learning")
BEST_CHECKS = os.path.join(HERE, "results", "cpu", "best_check")
# <!-- figure: cpu/sps_pairs_impala_xla.json median_ratio {:.2f} -->0.99<!-- /figure -->: a value
# of any results file (a path under benchmarks/results/, a dotted key, list indices as
# numbers), formatted.
FIGURE = re.compile(
    r"<!-- figure: (?P<path>\S+) (?P<key>\S+) (?P<fmt>[^>]*?) -->(?P<body>.*?)<!-- /figure -->"
)
INLINE_BEST = re.compile(r"<!-- best: (?P<spec>[^>]*?) -->(?P<body>.*?)<!-- /best -->")
BEST_BLOCK = re.compile(
    r"<!-- best-check\n(?P<spec>.*?)-->\n(?P<body>.*?)<!-- /best-check -->", re.DOTALL
)
# <!-- published-table: cpu/published/mujoco_v4.json -->...<!-- /published-table -->: sweeps
# beside published figures (`published.py`'s table of its results file).
PUBLISHED = re.compile(
    r"<!-- published-table: (?P<path>\S+) -->\n(?P<body>.*?)<!-- /published-table -->", re.DOTALL
)
PAGES = ("README.md", "docs/results/learning.md", "docs/results/performance.md")
IMPROVEMENT_REPS = 2000  # rliable's README uses 2,000 resamples for this statistic
BLOCK = re.compile(
    r"<!-- learning-(?P<kind>table|compare)\n(?P<spec>.*?)-->\n(?P<body>.*?)"
    r"<!-- /learning-(?P=kind) -->",
    re.DOTALL,
)
INLINE = re.compile(r"<!-- learning: (?P<spec>[^>]*?) -->(?P<body>.*?)<!-- /learning -->")
INLINE_P = re.compile(
    r"<!-- learning-p: (?P<a>\S+) > (?P<b>\S+) -->(?P<body>.*?)<!-- /learning-p -->"
)
HEADER = (
    "seeds crossing the target",
    "env steps to the first crossing: median (IQR); IQM (95% CI)",
    "seconds to it, median (IQR)",
    "seeds holding it at the last evaluation",
    "last evaluation: IQM (95% CI)",
)


class SpecError(ValueError):
    """A marker that names no file, a file judged at another target than its table's."""


def load(name: str, root: str = RESULTS) -> tuple[dict[str, Any], dict[str, Any], float]:
    """`NAME[@T]` -> (the result, the aggregate judged at its target or T, that target)."""
    stem, _, at = name.partition("@")
    path = os.path.join(root, stem + ".json")
    try:
        with open(path) as f:
            result = json.load(f)
    except OSError:
        raise SpecError(f"{name}: no results file {os.path.relpath(path, ROOT)}") from None
    if not at:
        return result, result["aggregate"], result["target"]
    judged = result.get("aggregate_at", {}).get(f"{float(at):g}")
    if judged is None:
        raise SpecError(f"{name}: run restate_learning.py {stem}.json --at-target {at}")
    return result, judged, float(at)


def render(text: str, root: str = RESULTS) -> str:
    """`text` with every marked part generated again from the files it names."""
    text = BLOCK.sub(lambda m: _block(m, root), text)
    checks = os.path.join(root, "..", "best_check")
    text = BEST_BLOCK.sub(lambda m: _best_block(m, checks), text)
    text = INLINE_BEST.sub(lambda m: _inline_best(m, checks), text)
    text = FIGURE.sub(lambda m: _figure(m, os.path.join(root, "..", "..")), text)
    text = PUBLISHED.sub(lambda m: _published(m, os.path.join(root, "..", "..")), text)
    text = INLINE_P.sub(lambda m: _inline_p(m, root), text)
    return INLINE.sub(lambda m: _inline(m, root), text)


def _block(match: re.Match, root: str) -> str:
    spec = match["spec"]
    lines = [line.strip() for line in spec.strip().splitlines() if line.strip()]
    is_option = re.compile(r"^(columns|target|metrics|each seed):").match
    options = dict(line.split(":", 1) for line in lines if is_option(line))
    rows = [[cell.strip() for cell in line.split("|")] for line in lines if not is_option(line)]
    table = (_compare if match["kind"] == "compare" else _table)(rows, options, root)
    kind = match["kind"]
    return f"<!-- learning-{kind}\n{spec}-->\n\n{table}\n\n<!-- /learning-{kind} -->"


def _labels(options: dict[str, str], default: tuple[str, ...]) -> list[str]:
    columns = options.get("columns")
    return [c.strip() for c in columns.split("|")] if columns else list(default)


def _table(rows: list[list[str]], options: dict[str, str], root: str) -> str:
    metrics = [m.strip().split("=", 1) for m in options.get("metrics", "").split("|") if m.strip()]
    each = "each seed" in options  # the last evaluation of every seed, for a few seeds
    header = [*_labels(options, ("run", "condition")), *HEADER]
    header += [
        *(["last evaluation, each seed"] if each else []),
        *(m[0] for m in metrics),
        "result",
    ]
    lines = [_row(header), "|" + " --- |" * len(header)]
    for name, *labels in rows:
        result, agg, target = load(name, root)
        if "target" in options and target != float(options["target"]):
            raise SpecError(
                f"{name} is judged at {target:g}, its table at {options['target'].strip()}"
            )
        cells = [*labels, *_figures(result, agg, target)]
        small = is_small(target)
        cells += [", ".join(number(v, small) for v in _finals(result))] if each else []
        cells += [_metric(result, key) for _, key in metrics]
        lines.append(_row([*cells, _source(name, result)]))
    return "\n".join(lines)


def _figures(result: dict[str, Any], agg: dict[str, Any], target: float) -> list[str]:
    n, small = agg["seeds"], is_small(target)
    steps, secs = agg["env_steps_to_target"], agg["seconds_to_target"]
    return [
        f"**{agg['successes']} / {n}**{_missed(result, target)}",
        "—"
        if not steps
        else f"{_quartiles(steps, '{:,.0f}')}; IQM {iqm_text(agg['env_steps_to_target_iqm'])}",
        "—" if not secs else _quartiles(secs, "{:.1f}"),
        f"{agg['held']} / {n}",
        iqm_text(agg["final_eval_iqm"], small),
    ]


def _missed(result: dict[str, Any], target: float) -> str:
    """The seeds that never crossed and their best evaluation, when one to three did not."""
    seeds = at_target(result["per_seed"], target, result["budget"])
    missed = [s for s in seeds if not s["success"]]
    if not 1 <= len(missed) <= 3:
        return ""
    small = is_small(target)
    return (
        " (not: "
        + "; ".join(
            f"seed {s['seed']}, best {number(s['best_eval_return'], small)}" for s in missed
        )
        + ")"
    )


def _quartiles(q: dict[str, float], fmt: str) -> str:
    return f"{fmt.format(q['median'])} ({fmt.format(q['q25'])}-{fmt.format(q['q75'])})"


def _metric(result: dict[str, Any], spec: str) -> str:
    """`key` (the median over seeds of each run's median), `key:+` (signed), `key:p90` (and the
    median over seeds of their 90th percentiles), three significant digits."""
    key, *flags = spec.split(":")
    fmt = "{:+.3g}" if "+" in flags else "{:.3g}"
    text = fmt.format(result["aggregate"]["metric_medians"][key])
    if "p90" in flags:
        runs = [s["metrics"][key]["p90"] for s in result["per_seed"] if s["metrics"].get(key)]
        text += " / " + fmt.format(float(np.median(runs)))
    return text


def _source(name: str, result: dict[str, Any]) -> str:
    stem, _, at = name.partition("@")
    commit = (result.get("git_commit") or "?").split()[0]
    judged = f", judged at {at} from its curves" if at else ""
    return f"`{stem}` ({commit}{judged})"


def _compare(rows: list[list[str]], options: dict[str, str], root: str) -> str:
    header = [
        *_labels(options, ("run",)),
        "A: crossing; holding at the end",
        "A: env steps to the first crossing, median (IQR)",
        "B: crossing; holding at the end",
        "B: env steps, median (IQR)",
        "P(A > B) on the last evaluation (95% CI)",
        "A, B",
    ]
    lines = [_row(header), "|" + " --- |" * len(header)]
    for a_name, b_name, *labels in rows:
        (a, a_agg, _), (b, b_agg, _) = load(a_name, root), load(b_name, root)
        cells = [*labels]
        for agg in (a_agg, b_agg):
            n = agg["seeds"]
            steps = agg["env_steps_to_target"]
            cells += [
                f"**{agg['successes']} / {n}**; {agg['held']} / {n}",
                _quartiles(steps, "{:,.0f}") if steps else "—",
            ]
        improvement = _improvement(a_name, b_name, root).replace("95% CI ", "")
        cells += [improvement, f"{_source(a_name, a)}, {_source(b_name, b)}"]
        lines.append(_row(cells))
    return "\n".join(lines)


def _finals(result: dict[str, Any]) -> list[float]:
    return [
        s["final_eval_return"] for s in result["per_seed"] if s["final_eval_return"] is not None
    ]


def _inline(match: re.Match, root: str) -> str:
    parts = []
    for item in match["spec"].split(";"):
        label, _, name = item.strip().rpartition("=")
        result, agg, target = load(name.strip(), root)
        parts.append(_sentence(label.strip(), agg, target))
    return f"<!-- learning: {match['spec']} -->{'; '.join(parts)}<!-- /learning -->"


def _improvement(a_name: str, b_name: str, root: str) -> str:
    """`0.38 (95% CI 0.20 to 0.55)`: P(a seed of A ends above a seed of B)."""
    xs, ys = (_finals(load(name, root)[0]) for name in (a_name, b_name))
    low, high = improvement_ci(xs, ys, reps=IMPROVEMENT_REPS)
    return f"{probability_of_improvement(xs, ys):.2f} (95% CI {low:.2f} to {high:.2f})"


def _inline_p(match: re.Match, root: str) -> str:
    body = _improvement(match["a"], match["b"], root)
    return f"<!-- learning-p: {match['a']} > {match['b']} -->{body}<!-- /learning-p -->"


def _sentence(label: str, agg: dict[str, Any], target: float) -> str:
    """`quiet: 20/20 seeds cross 475 (median 24,000 env steps), 10/20 hold it at their last
    evaluation (IQM 443.6, 95% CI 332.0 to 494.4)`."""
    n, steps, small = agg["seeds"], agg["env_steps_to_target"], is_small(target)
    text = f"{label}: " if label else ""
    text += f"{agg['successes']}/{n} seeds cross {target:g}"
    if steps:
        text += f" (median {steps['median']:,.0f} env steps)"
    last = agg["final_eval_iqm"]
    low, high = (number(v, small) for v in last["ci95"])
    return text + (
        f", {agg['held']}/{n} hold it at their last evaluation (IQM {number(last['iqm'], small)}, "
        f"95% CI {low} to {high})"
    )


def _results_file(results: str, relative: str) -> Any:
    """The JSON of a results file under `results` (benchmarks/results/), or SpecError."""
    path = os.path.join(results, relative)
    try:
        with open(path) as f:
            return json.load(f)
    except OSError:
        raise SpecError(f"no results file {os.path.relpath(path, ROOT)}") from None


def _figure(match: re.Match, results: str) -> str:
    """One value of a results file, as the marker formats it."""
    value: Any = _results_file(results, match["path"])
    for part in match["key"].split("."):
        try:
            value = value[int(part)] if isinstance(value, list) else value[part]
        except (KeyError, IndexError, ValueError):
            raise SpecError(f"{match['path']} has no {match['key']!r}") from None
    body = match["fmt"].format(value)
    return f"<!-- figure: {match['path']} {match['key']} {match['fmt']} -->{body}<!-- /figure -->"


def _published(match: re.Match, results: str) -> str:
    """`published.py`'s table of the results file the marker names."""
    body = published.table(_results_file(results, match["path"]))
    return f"<!-- published-table: {match['path']} -->\n\n{body}\n\n<!-- /published-table -->"


def _best_check(name: str, root: str) -> dict[str, Any]:
    path = os.path.join(root, name + ".json")
    try:
        with open(path) as f:
            return json.load(f)
    except OSError:
        raise SpecError(f"{name}: no best_check file {os.path.relpath(path, ROOT)}") from None


def _inline_best(match: re.Match, root: str) -> str:
    """`quiet: --step best of 20/20 seeds scored within noise ...` for each `label=NAME`."""
    parts = []
    for item in match["spec"].split(";"):
        label, _, name = item.strip().rpartition("=")
        check = _best_check(name.strip(), root)
        text = f"{label.strip()}: " if label.strip() else ""
        parts.append(
            f"{text}`--step best` of {check['best_within_noise']}/{check['best_checked']} "
            f"scored again within noise"
        )
    body = "; ".join(parts)
    return f"<!-- best: {match['spec']} -->{body}<!-- /best -->"


def _best_block(match: re.Match, root: str) -> str:
    """A table of `best_check.py` files: does each sweep's `best` hold what its runs recorded?"""
    spec = match["spec"]
    header = [
        "run",
        "condition",
        "seeds reaching the target",
        "`--step best` within the noise of the recorded evaluation",
        "largest difference (standard errors)",
        "final evaluation at or above the stop line, or explained",
        "result",
    ]
    lines = [_row(header), "|" + " --- |" * len(header)]
    for line in (row.strip() for row in spec.strip().splitlines()):
        name, *labels = (cell.strip() for cell in line.split("|"))
        check = _best_check(name, root)
        policies = [p for run in check["runs"] for p in run["policies"]]
        worst = max((p["standard_errors"] for p in policies), default=0.0)
        commit = (check["provenance"]["source"]["git_commit"] or "?")[:7]
        cells = [
            *labels,
            f"{check['reached']} / {len(check['runs'])}",
            f"**{check['best_within_noise']} / {check['best_checked']}**",
            f"{worst:.2f} (allowed {check['z']:g})",
            f"{check['final_ok']} / {len(check['runs'])}",
            f"`{name}` ({commit})",
        ]
        lines.append(_row(cells))
    table = "\n".join(lines)
    return f"<!-- best-check\n{spec}-->\n\n{table}\n\n<!-- /best-check -->"


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None) -> int:
    check = "--check" in (argv if argv is not None else sys.argv[1:])
    stale = []
    for page in PAGES:
        path = os.path.join(ROOT, page)
        with open(path) as f:
            text = f.read()
        try:
            generated = render(text)
        except SpecError as e:
            print(f"error: {page}: {e}", file=sys.stderr)
            return 2
        if generated != text:
            stale.append(page)
            if not check:
                with open(path, "w") as f:
                    f.write(generated)
    verb = "differ from their files" if check else "rewritten"
    print(
        f"{', '.join(stale) or 'no page'} {verb}" if stale else "every page agrees with its files"
    )
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
