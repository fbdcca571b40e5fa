"""A one-agent run writes what it wrote before the engines held lanes (issue 56): each shipped
one-agent shape's checkpoint items, packed leaves (paths, shapes, dtypes), meta and summary key
trees and `metrics.jsonl` keys equal the fixture that code wrote (`tests/layouts.py`), and
`load_policy` reads its checkpoint as before."""

import json

import pytest
from layouts import FIXTURE, RUNS, layout_of

with open(FIXTURE) as f:
    EXPECTED = json.load(f)


@pytest.mark.parametrize("name", sorted(RUNS))
def test_a_one_agent_run_writes_the_layout_it_always_wrote(tmp_path, name):
    from jaxrl_dist import load_policy

    workdir = str(tmp_path / name)
    layout = layout_of(name, workdir)
    expected = EXPECTED[name]
    for part in ("checkpoint", "beside_steps", "metrics_keys", "summary"):
        assert layout[part] == expected[part], f"{name}: {part} changed"
    policy = load_policy(workdir)
    assert policy.name is None and policy.step > 0
