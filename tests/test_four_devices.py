"""The same work on 4 fake CPU devices as on 1, in one process of its own
(`four_device_checks.py`): the learner update of IMPALA and PPO, discrete and continuous; the
Anakin program of each data flow; a checkpoint whose leaf is split over the devices."""

import pytest
from fake_devices import run_check


@pytest.fixture(scope="module")
def verdicts() -> dict:
    return run_check("four_device_checks.py")


def test_four_device_updates_equal_one_device_updates(verdicts):
    results = verdicts["sharded_update"]
    assert set(results) == {"impala", "ppo", "ppo_continuous_obs_norm", "impala_continuous"}
    for case, result in results.items():
        # The batch really is split over the 4 devices along B.
        assert any("'data': 4" in s and "P(None, 'data')" in s for s in result["shardings"]), case
        assert result["max_param_diff"] < 1e-5, (case, result)
        for name, diff in result["metric_diffs"].items():
            assert diff < 1e-4, (case, name, diff)


def test_the_anakin_program_on_one_and_four_devices_agrees(verdicts):
    """Each data flow (PPO on-policy, Rainbow's device replay) on 1 and on 4 fake devices: the
    same learner state within float tolerance after 6 rollouts of 2 seeds with 8 envs each."""
    result = verdicts["anakin"]
    ppo, rainbow = result["anakin_ppo_cartpole.py"], result["anakin_rainbow_cartpole.py"]
    for flow in (ppo, rainbow):
        assert flow["devices"] == [[1], [4]]  # per-env arrays on 1 device, then split over 4
        assert flow["params_moved"] > 0
        assert flow["max_params_diff"] < 1e-4, result
    assert ppo["update_step"] == [6, 6]
    # 8 envs x 16 steps a rollout: 8 updates after each from the 4th (512 held)
    assert rainbow["update_step"] == [24, 24]


def test_sharded_leaves_stay_sharded_and_restore_onto_other_meshes(verdicts):
    """A leaf split over the devices is saved as its shards (not packed), restores onto its own
    sharding and onto a 2-device one, bit-identical."""
    result = verdicts["checkpoint"]
    assert result["stored"] == ["['sharded'][0]"] and "bytes" in result["packed_files"]
    assert result["same_bits"] == [True, True, True]
    assert result["restored_specs"] == [["data"], ["data"], []]
    assert result["restored_devices"] == [4, 2, 4]
