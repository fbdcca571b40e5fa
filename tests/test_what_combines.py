"""The docs' table of what combines (`docs/guides/what-combines.md`, issue 57 item 7) agrees
with the checks: each set-up's row is probed again through `Trainer(config)` and every cell
must read as the page says, a refusal word for word; the counts under the table are the
table's."""

import os
import re

import pytest
from train_runs import ROOT

from jaxrl_dist.tools import combinations as c

PAGE = os.path.join(ROOT, "docs", "guides", "what-combines.md")
REGENERATE = "python -m jaxrl_dist.tools.combinations --write docs/guides/what-combines.md"


def _page() -> tuple[dict[str, list[str]], dict[int, str], str]:
    """(the rows' cells by set-up, the numbered refusals, the counts line) of the page."""
    text = open(PAGE).read()
    rows = {}
    for line in text.splitlines():
        cells = [x.strip() for x in line.strip("|").split("|")]
        if line.startswith("| ") and cells[0] not in ("set-up",):
            rows[cells[0]] = cells[1:]
    refusals = {int(n): why for n, why in re.findall(r"^(\d+)\. (.*)$", text, re.M)}
    counts = re.search(r"^\d+ pairs: .*$", text, re.M).group(0)
    return rows, refusals, counts


@pytest.mark.parametrize("setup", c.SETUPS, ids=lambda s: s.config)
def test_each_row_reads_as_the_checks_answer(setup):
    rows, refusals, _ = _page()
    assert setup.name in rows, f"{setup.name!r} has no row; regenerate: {REGENERATE}"
    c._register_probes()
    probed = c.table_row(setup)
    for lever, mark in zip(c.LEVERS, rows[setup.name], strict=True):
        cell = probed[lever.name]
        if cell in (c.ACCEPTED, c.NOT_APPLICABLE):
            assert mark == cell, (setup.name, lever.name, cell, REGENERATE)
        else:
            number = re.fullmatch(r"no \((\d+)\)", mark)
            assert number and refusals[int(number.group(1))] == cell, (
                setup.name,
                lever.name,
                cell,
                REGENERATE,
            )


def test_the_counts_are_the_tables():
    rows, refusals, counts = _page()
    assert set(rows) == {s.name for s in c.SETUPS}
    cells = {
        name: {
            lever.name: refusals[int(m[4:-1])] if m.startswith("no (") else m
            for lever, m in zip(c.LEVERS, marks, strict=True)
        }
        for name, marks in rows.items()
    }
    n = c.counts(cells)
    assert counts == (
        f"{n['pairs']} pairs: {n['accepted']} accepted, {n['not_yet']} refused as not done yet, "
        f"{n['kept']} refused for a reason of the pair itself."
    )
