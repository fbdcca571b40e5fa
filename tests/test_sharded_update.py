"""The learner update on 4 fake CPU devices equals the 1-device update (own process)."""

from fake_devices import run_check


def test_four_device_updates_equal_one_device_updates():
    results = run_check("sharded_update_check.py")
    assert set(results) == {"impala", "ppo", "ppo_continuous_obs_norm", "impala_continuous"}
    for case, result in results.items():
        # The batch really is split over the 4 devices along B.
        assert any("'data': 4" in s and "P(None, 'data')" in s for s in result["shardings"]), case
        assert result["max_param_diff"] < 1e-5, (case, result)
        for name, diff in result["metric_diffs"].items():
            assert diff < 1e-4, (case, name, diff)
