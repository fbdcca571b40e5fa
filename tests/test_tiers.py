"""The suite's tiers (`conftest.py`): a file in the `ops` or `parts` tier starts no training run
(no `Trainer`, no `scripts/train.py`, no shared run helper), so `-m "ops or parts"` stays fast;
and every listed file exists."""

import os
import re

from conftest import OPS, PARTS

TESTS = os.path.dirname(os.path.abspath(__file__))
STARTS_A_RUN = re.compile(
    r"Trainer\(|train_main|train_run\(|train_cli|interrupted_run|make_trainer|scripts/train\.py"
    r"|finished_run|layout_of|run_check|subprocess"
)


def test_the_fast_tiers_start_no_run():
    for name in (*OPS, *PARTS):
        path = os.path.join(TESTS, name)
        assert os.path.exists(path), f"{name} is listed in a tier but does not exist"
        if name == "test_tiers.py":
            continue
        with open(path) as f:
            found = STARTS_A_RUN.search(f.read())
        assert found is None, f"{name} starts a run ({found.group(0)}): it belongs in `runs`"
