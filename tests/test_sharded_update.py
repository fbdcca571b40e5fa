"""The learner update on 4 fake CPU devices equals the 1-device update (own process)."""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(__file__)


def test_four_device_updates_equal_one_device_updates():
    env = {**os.environ, "JAX_NUM_CPU_DEVICES": "4", "JAX_PLATFORMS": "cpu"}
    out = subprocess.run(
        [sys.executable, os.path.join(HERE, "sharded_update_check.py")],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    results = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(results) == {"impala", "ppo", "ppo_continuous_obs_norm", "impala_continuous"}
    for case, result in results.items():
        # The batch really is split over the 4 devices along B.
        assert any("'data': 4" in s and "P(None, 'data')" in s for s in result["shardings"]), case
        assert result["max_param_diff"] < 1e-5, (case, result)
        for name, diff in result["metric_diffs"].items():
            assert diff < 1e-4, (case, name, diff)
