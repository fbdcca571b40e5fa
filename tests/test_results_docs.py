"""The learning figures of the README and docs/results/ are the figures of the files they cite.

Every table row, sentence or cell of those pages that states a learning sweep is generated from
its results file by `benchmarks/learning_tables.py` between markers; these tests regenerate each
page in memory and compare, find any hand-written table row that cites a results file, and check
that every results file's added statistics are what its per-seed data give. Files are read,
nothing runs.
"""

import difflib
import functools
import json
import os
import re
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import learning_tables  # noqa: E402
import restate_learning  # noqa: E402
import seed_statistics  # noqa: E402

RESULTS = learning_tables.RESULTS


def _read(page: str) -> str:
    with open(os.path.join(ROOT, page)) as f:
        return f.read()


@pytest.mark.parametrize("page", learning_tables.PAGES)
def test_every_page_states_what_the_files_it_cites_hold(page):
    text = _read(page)
    generated = learning_tables.render(text)
    diff = difflib.unified_diff(text.splitlines(), generated.splitlines(), lineterm="", n=0)
    assert generated == text, (
        f"{page} differs from its results files; run python benchmarks/learning_tables.py:\n"
        + "\n".join(list(diff)[:20])
    )


@functools.cache
def _stems() -> frozenset[str]:
    return {
        os.path.relpath(p, RESULTS).removesuffix(".json") for p in restate_learning.learning_files()
    }


@pytest.mark.parametrize("page", learning_tables.PAGES)
def test_no_hand_written_table_row_cites_a_learning_result(page):
    """A table row outside the generated parts that names a sweep (`name`) would state figures
    no test ties to the file: such a row belongs in a `learning-table` marker."""
    outside = learning_tables.BLOCK.sub("", _read(page))
    outside = learning_tables.BEST_BLOCK.sub("", outside)
    outside = learning_tables.INLINE.sub("", outside)
    outside = learning_tables.INLINE_BEST.sub("", outside)
    stems = _stems()
    rows = [line for line in outside.splitlines() if line.startswith("|")]
    cited = [
        (row[:80], name)
        for row in rows
        for name in re.findall(r"`([\w./-]+?)(?:\.json)?`", row)
        if name in stems
    ]
    assert not cited, cited


def test_the_rows_the_issue_found_wrong_now_state_their_files():
    """`impala_cartpole`'s row states that file's figures (it stated an older sweep's), and
    R2D2's busy rows under a "to 475" table are judged at 475, not at the 400 they ran with."""
    page = _read("docs/results/learning.md")
    with open(os.path.join(RESULTS, "impala_cartpole.json")) as f:
        agg = json.load(f)["aggregate"]
    (row,) = [line for line in page.splitlines() if "| `impala_cartpole` (" in line]
    steps = agg["env_steps_to_target"]
    assert f"**{agg['successes']} / {agg['seeds']}**" in row
    assert f"{steps['median']:,.0f} ({steps['q25']:,.0f}-{steps['q75']:,.0f})" in row
    r2d2 = [line for line in page.splitlines() if "`r2d2_memory_load1`" in line]
    assert r2d2 and all("judged at 475" in line for line in r2d2)
    table_at_475 = "<!-- learning-table\ntarget: 475\nr2d2_memory_load1 | R2D2 | load 2\n-->\n"
    with pytest.raises(learning_tables.SpecError, match="judged at 400, its table at 475"):
        learning_tables.render(table_at_475 + "\n<!-- /learning-table -->")


def test_a_figure_edited_by_hand_is_found():
    readme = _read("README.md")
    held = re.search(r"(\d+)/20 hold it", readme)  # a generated figure of the headline rows
    wrong = f"{(int(held[1]) + 1) % 21}/20 hold it"
    edited = readme[: held.start()] + wrong + readme[held.end() :]
    assert edited != readme and learning_tables.render(edited) != edited


def test_every_learning_result_states_the_holding_and_iqm_its_seeds_give():
    """The statistics restate_learning.py added (or learning.py wrote) agree with each file's
    per-seed data: the count holding the target, the IQMs (their intervals inside the data)."""
    wrong = []
    for path in restate_learning.learning_files():
        with open(path) as f:
            result = json.load(f)
        agg, seeds, target = result["aggregate"], result["per_seed"], result["target"]
        finals = [s["final_eval_return"] for s in seeds if s["final_eval_return"] is not None]
        crossed = [s["env_steps_to_target"] for s in seeds if s["success"]]
        held = [
            s["seed"]
            for s in seeds
            if s["final_eval_return"] is not None and s["final_eval_return"] >= target
        ]
        checks = {
            "held": agg.get("held") == len(held) and agg.get("held_seeds") == held,
            "final_eval_iqm": _iqm_of(agg.get("final_eval_iqm"), finals),
            "env_steps_to_target_iqm": _iqm_of(agg.get("env_steps_to_target_iqm"), crossed),
        }
        wrong += [f"{os.path.relpath(path, RESULTS)}: {k}" for k, ok in checks.items() if not ok]
    assert not wrong, wrong


def _iqm_of(summary, values) -> bool:
    if not values:
        return summary is None
    low, high = summary["ci95"]
    return (
        summary["runs"] == len(values)
        and np.isclose(summary["iqm"], seed_statistics.iqm(values))
        and min(values) <= low <= high <= max(values)
    )


def test_a_best_check_table_and_sentence_state_their_file(tmp_path):
    """`best_check.py`'s files: a table of each sweep's checks, and a sentence for a cell."""
    learning, checks = tmp_path / "learning", tmp_path / "best_check"
    learning.mkdir(), checks.mkdir()
    check = {
        "z": 3.0,
        "reached": 2,
        "best_within_noise": 2,
        "best_checked": 2,
        "final_ok": 3,
        "runs": [
            {"policies": [{"standard_errors": 0.5}]},
            {"policies": [{"standard_errors": 1.25}]},
            {"policies": []},
        ],
        "provenance": {"source": {"git_commit": "0123456789abcdef"}},
    }
    (checks / "sweep.json").write_text(json.dumps(check))
    page = "<!-- best-check\nsweep | `x.py` | quiet\n-->\nstale\n<!-- /best-check -->"
    table = learning_tables.render(page, str(learning))
    assert (
        "| `x.py` | quiet | 2 / 3 | **2 / 2** | 1.25 (allowed 3) | 3 / 3 | `sweep` (0123456) |"
        in (table)
    )
    cell = learning_tables.render("<!-- best: quiet=sweep -->old<!-- /best -->", str(learning))
    assert cell == (
        "<!-- best: quiet=sweep -->quiet: `--step best` of 2/2 scored again within noise"
        "<!-- /best -->"
    )
    with pytest.raises(learning_tables.SpecError, match="no best_check file"):
        learning_tables.render("<!-- best: quiet=missing -->x<!-- /best -->", str(learning))


def test_a_figure_marker_states_its_files_value(tmp_path):
    """Any results file's value in a page: `<!-- figure: PATH KEY FORMAT -->`."""
    learning = tmp_path / "cpu" / "learning"
    learning.mkdir(parents=True)
    (tmp_path / "cpu" / "pairs.json").write_text(json.dumps({"pairs": [{"ratio": 0.98765}]}))
    page = "ratio <!-- figure: cpu/pairs.json pairs.0.ratio {:.2f} -->1.5<!-- /figure -->x"
    assert learning_tables.render(page, str(learning)) == page.replace("1.5", "0.99")
    for bad, message in (("cpu/none.json pairs", "no results file"), ("cpu/pairs.json nope", "no")):
        with pytest.raises(learning_tables.SpecError, match=message):
            learning_tables.render(f"<!-- figure: {bad} {{}} -->?<!-- /figure -->", str(learning))


def test_a_published_table_states_its_files_rows(tmp_path):
    """`<!-- published-table: PATH -->`: `published.py`'s table of that file, regenerated."""
    learning = tmp_path / "cpu" / "learning"
    learning.mkdir(parents=True)
    scores = {"per_seed": [1.0], "mean": 1234.4, "std": 5.0, "iqm": {"iqm": 1.0, "ci95": [0, 2]}}
    published_figure = {"mean": 1442.64, "std": 46.03}
    row = {"label": "PPO", "train": scores, "eval": scores, "published": published_figure}
    result = {"tasks": {"HalfCheetah-v4": [{**row, "against_published": "below"}]}}
    (tmp_path / "cpu" / "cmp.json").write_text(json.dumps(result))
    page = "<!-- published-table: cpu/cmp.json -->\nold\n<!-- /published-table -->"
    text = learning_tables.render(page, str(learning))
    assert (
        "| HalfCheetah-v4 | PPO | 1 | 1,234 +/- 5 |" in text
        and "1,442.64 +/- 46.03 | below |" in text
    )
    assert learning_tables.render(text, str(learning)) == text  # stable once generated
    with pytest.raises(learning_tables.SpecError, match="no results file"):
        learning_tables.render(page.replace("cmp", "none"), str(learning))
