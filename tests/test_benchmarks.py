"""The benchmark scripts run and record what they claim; the sweep's merge; the ParamsStore fix
(the stage helpers: `test_benchmark_stages.py`).

The CLI runs are subprocesses (throughput.py on CartPole :quick, scaling.py with fake CPU
devices); nothing here asserts a speed: the figures only have to be present and consistent.
"""

import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from jaxrl_dist.config import jsonable
from jaxrl_dist.config.cli import parse_args

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHMARKS = os.path.join(ROOT, "benchmarks")
THROUGHPUT = os.path.join(BENCHMARKS, "throughput.py")
SCALING = os.path.join(BENCHMARKS, "scaling.py")
CARTPOLE_QUICK = os.path.join(ROOT, "configs", "impala_cartpole.py") + ":quick"
STAGES = (
    "raw_sync",
    "raw_async",
    "actors",
    "learner",
    "sync_baseline",
    "end_to_end",
    "end_to_end_central",
)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

sys.path.insert(0, BENCHMARKS)
import sweep  # noqa: E402


def _run(args, env=None, timeout=300):
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _failed(proc) -> str:
    return f"exit {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"


def _figure(stage_result: dict) -> float:
    """The stage's SPS, or for the learner its samples/s with the host transfer."""
    return stage_result.get("sps", stage_result.get("with_transfer_samples_per_s"))


def _assert_provenance(result: dict, config) -> None:
    """The result names its commit, whether the tree differed (then the diff's hash), the
    config as train.py builds it, and the machine (`benchmarks/provenance.py`)."""
    origin = result["provenance"]
    source = origin["source"]
    assert len(source["git_commit"]) == 40 and isinstance(source["dirty"], bool)
    assert (source["diff_sha256"] is not None) == bool(source["changed"])
    expected = None if config is None else jsonable(config.to_dict())
    assert origin["config"] == expected
    assert origin["machine"]["cpu_count"] == os.cpu_count() and origin["machine"]["device"]


def _is_png(path) -> bool:
    with open(path, "rb") as f:
        return f.read(len(PNG_MAGIC)) == PNG_MAGIC


# --- throughput.py -------------------------------------------------------------------------------


def test_throughput_all_stages_consistent_result(tmp_path):
    """All seven stages measured with a positive figure; the ratios, the sync/async and
    central/local speed-ups and the bottleneck follow from the figures; command, environment,
    settings, PNG and table recorded."""
    out_dir = tmp_path / "out"
    args = [THROUGHPUT, "--config", CARTPOLE_QUICK, "--seconds", "0.25", "--out-dir", str(out_dir)]
    proc = _run([*args, "--allow-dirty"])
    assert proc.returncode == 0, _failed(proc)
    with open(out_dir / "impala_cartpole_quick.json") as f:
        result = json.load(f)

    measured = result["stages"]
    assert set(measured) == set(STAGES)
    for stage in STAGES:
        assert _figure(measured[stage]) > 0, (stage, measured[stage])

    phases = measured["end_to_end"]["phases_s"]  # where the run's wall time went
    assert 0 < phases["startup"] <= phases["to_first_log"] + 0.01  # rounded to 3 and 2 places
    assert phases["after_window"] >= 0
    assert measured["end_to_end"]["compile"]["compiles"] >= 1

    raw = measured["raw_async"]["sps"]
    ratios = result["over_raw_async"]
    with_sps = [s for s in STAGES if "sps" in measured[s]]
    assert set(with_sps) == set(STAGES) - {"learner"}
    for stage in with_sps:
        assert ratios[stage] * raw == pytest.approx(measured[stage]["sps"], rel=1e-9), stage
    assert ratios["learner"] * raw == pytest.approx(
        measured["learner"]["with_transfer_samples_per_s"], rel=1e-9
    )
    assert result["async_over_sync"] == pytest.approx(
        measured["end_to_end"]["sps"] / measured["sync_baseline"]["sps"], rel=1e-9
    )
    assert result["central_over_local"] == pytest.approx(
        measured["end_to_end_central"]["sps"] / measured["end_to_end"]["sps"], rel=1e-9
    )

    bottleneck = result["bottleneck"]
    capacities = bottleneck["capacities_sps"]
    assert len(capacities) == 3
    assert bottleneck["stage"] == min(capacities, key=capacities.get)
    assert sorted(capacities.values()) == sorted(
        [raw, measured["actors"]["sps"], measured["learner"]["with_transfer_samples_per_s"]]
    )
    assert bottleneck["end_to_end_over_slowest_stage"] == pytest.approx(
        measured["end_to_end"]["sps"] / capacities[bottleneck["stage"]], rel=1e-9
    )

    assert "throughput.py" in result["command"] and "--seconds 0.25" in result["command"]
    assert result["config"] == CARTPOLE_QUICK
    env = result["environment"]
    assert env["cpu_count"] == os.cpu_count()
    assert env["versions"]["jax"] == jax.__version__
    assert result["seconds_per_stage"] == 0.25
    config, _ = parse_args(["--config", CARTPOLE_QUICK, "--workdir", "unused"])
    settings = result["settings"]
    assert settings["env_id"] == "CartPole-v1"
    assert settings["num_actor_threads"] == config.sebulba.num_actor_threads
    assert settings["envs_per_actor"] == config.sebulba.envs_per_actor
    for key in ("env_batch_size", "batch_size"):
        assert settings[key] == getattr(config, key), key
    assert settings["unroll_length"] == config.unroll_length
    _assert_provenance(result, config)

    png = out_dir / "impala_cartpole_quick.png"
    assert png.is_file() and _is_png(png)
    assert "bound by:" in proc.stdout


def test_throughput_repeats_interleave_and_report_medians(tmp_path):
    """--repeat 2: every stage measured twice; each shown figure is one of its runs; the
    speed-up is the median of the per-repeat ratios (robust to a drifting machine)."""
    out_dir = tmp_path / "out"
    args = [
        THROUGHPUT,
        "--config",
        CARTPOLE_QUICK,
        "--seconds",
        "0.25",
        "--repeat",
        "2",
        "--stages",
        "sync_baseline,end_to_end",
        "--out-dir",
        str(out_dir),
        "--no-plot",
        "--allow-dirty",
    ]
    proc = _run(args)
    assert proc.returncode == 0, _failed(proc)
    with open(out_dir / "impala_cartpole_quick.json") as f:
        result = json.load(f)
    for stage in ("sync_baseline", "end_to_end"):
        runs = result["repeats"][stage]
        assert len(runs) == 2
        assert result["stages"][stage]["sps"] in [r["sps"] for r in runs]
    pairs = zip(result["repeats"]["end_to_end"], result["repeats"]["sync_baseline"], strict=True)
    ratios = [a["sps"] / b["sps"] for a, b in pairs]
    assert result["async_over_sync_per_repeat"] == pytest.approx(ratios)
    assert result["async_over_sync"] == pytest.approx(float(np.median(ratios)))
    assert "over 2 repeats" in proc.stdout


def test_throughput_skips_central_inference_for_the_xla_actor_loop(tmp_path):
    args = [
        THROUGHPUT,
        "--config",
        CARTPOLE_QUICK,
        "--stages",
        "raw_async,end_to_end_central",
        "--seconds",
        "0.25",
        "--out-dir",
        str(tmp_path),
        "--no-plot",
        "--config.sebulba.actor_loop=xla",
        "--config.sebulba.async_envs=false",
        "--allow-dirty",
    ]
    proc = _run(args)
    assert proc.returncode == 0, _failed(proc)
    assert "end_to_end_central: skipped (the XLA actor loop" in proc.stdout
    with open(tmp_path / "impala_cartpole_quick.json") as f:
        assert set(json.load(f)["stages"]) == {"raw_async"}


# --- sweep.py ------------------------------------------------------------------------------------


def _point(name, sps, **overrides):
    return {
        "point": name,
        "overrides": overrides,
        "end_to_end_sps": sps,
        "raw_async_sps": 100.0,
        "over_raw_async": sps / 100.0,
    }


def test_sweep_merges_the_best_value_of_each_factor_that_beats_the_base():
    points = [
        _point("base", 50.0),
        _point("threads", 40.0, **{"sebulba.env_threads_per_actor": "4"}),
        _point("threads", 60.0, **{"sebulba.env_threads_per_actor": "8"}),
        _point("switch", 45.0, switch_interval_s="0.0005"),  # loses to the base: left out
        _point("loop", 70.0, **{"sebulba.actor_loop": "xla", "sebulba.async_envs": "False"}),
        {"point": "envs", "overrides": {"sebulba.envs_per_actor": "64"}, "error": "OOM"},
    ]
    assert sweep.best_overrides(points) == {
        "sebulba.env_threads_per_actor": "8",
        "sebulba.actor_loop": "xla",
        "sebulba.async_envs": "False",
    }
    result = {
        "name": "s",
        "environment": {"device": "cpu:cpu", "cpu_count": 2},
        "points": points,
        "best": {**points[4], **sweep.implied(70.0, 2), "repeats_sps": [70.0]},
    }
    table = sweep.markdown(result)
    assert "| base | base | 50 | 100 | 0.50 |" in table and "failed: OOM" in table
    # 200M Atari frames = 50M agent steps at 70 SPS; per core over 2 cores
    assert f"200M frames in {50e6 / 70 / 60:.0f} min; 35 SPS per core" in table
    assert "minutes_for_200m_frames" not in sweep.implied(70.0, 2, atari=False)


def test_sweep_bad_grid_is_a_one_line_error_and_writes_nothing(tmp_path):
    proc = _run(
        [
            os.path.join(BENCHMARKS, "sweep.py"),
            "--config",
            CARTPOLE_QUICK,
            "--grid",
            "tpu",
            "--out-dir",
            str(tmp_path),
        ]
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, _failed(proc)
    assert "--grid 'tpu'" in proc.stderr and not os.listdir(tmp_path)


def test_throughput_bad_stage_is_one_line_error_and_writes_nothing(tmp_path):
    """`--stages nonsense`: exit 2, a one-line `error:` on stderr, no out dir contents."""
    out_dir = tmp_path / "out"
    args = [
        THROUGHPUT,
        "--config",
        CARTPOLE_QUICK,
        "--seconds",
        "2",
        "--out-dir",
        str(out_dir),
        "--stages",
        "nonsense",
    ]
    proc = _run(args, timeout=120)
    assert proc.returncode == 2, _failed(proc)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error:") and "nonsense" in lines[0], lines[0]
    assert not out_dir.exists() or not any(out_dir.iterdir())


# --- scaling.py ----------------------------------------------------------------------------------


def test_scaling_actor_threads_and_two_fake_learner_devices(tmp_path):
    """Three points, all measured: 1 and 2 actor threads, and 2 learner devices (fake CPU devices
    here). The 2-device point guards the crash where actors' params aliased the learner's donated
    buffers."""
    out_dir = tmp_path / "out"
    args = [
        SCALING,
        "--config",
        CARTPOLE_QUICK,
        "--seconds",
        "0.25",
        "--actor-threads",
        "1,2",
        "--learner-devices",
        "2",
        "--out-dir",
        str(out_dir),
        "--allow-dirty",
    ]
    proc = _run(args, timeout=600)
    path = out_dir / "impala_cartpole_quick_scaling.json"
    assert path.is_file(), _failed(proc)
    with open(path) as f:
        result = json.load(f)
    points = result["points"]
    _assert_provenance(result, parse_args(["--config", CARTPOLE_QUICK, "--workdir", "x"])[0])
    errors = [(p["axis"], p["value"], p["error"]) for p in points if "error" in p]
    assert not errors, errors
    assert proc.returncode == 0, _failed(proc)
    assert [(p["axis"], p["value"]) for p in points] == [
        ("actor_threads", 1),
        ("actor_threads", 2),
        ("learner_devices", 2),
    ]
    for p in points:
        assert p["end_to_end_sps"] > 0, p
        if p["axis"] == "actor_threads":
            assert p["settings"]["num_actor_threads"] == p["value"], p["settings"]
        else:
            assert len(p["settings"]["learner_device_ids"]) == 2, p["settings"]
            assert p["environment"]["device_count"] == 2
            assert p["learner_samples_per_s"] > 0
    png = out_dir / "impala_cartpole_quick_scaling.png"
    assert png.is_file() and _is_png(png)


# --- ParamsStore ---------------------------------------------------------------------------------

PARAMS_STORE_CHECK = """
import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxrl_dist.acting.params_store import ParamsStore

devices = jax.devices()
assert len(devices) == 2, devices
replicated = NamedSharding(Mesh(np.array(devices), ("data",)), PartitionSpec())
host = {"w": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.ones(4, np.float32)}
params = jax.device_put(host, replicated)
store = ParamsStore([devices[0]])
store.publish(params, 7)
update = jax.jit(lambda p: jax.tree.map(lambda x: x + 1, p), donate_argnums=0)
jax.block_until_ready(update(params))
assert all(x.is_deleted() for x in jax.tree.leaves(params)), "the update did not donate"
got, version = store.get(devices[0])
assert version == 7, version
for name, x in got.items():
    assert x.devices() == {devices[0]}, (name, x.devices())
    np.testing.assert_array_equal(np.asarray(x), host[name])
print("ok")
"""


def test_params_store_copy_survives_donation_of_replicated_params():
    """Params replicated on a 2-device learner mesh, published for device 0, then donated to a
    jitted update: the store's copy is still readable and equal (it used to be device 0's shard
    of the donated buffers). Own process: JAX_NUM_CPU_DEVICES=2."""
    env = {**os.environ, "JAX_NUM_CPU_DEVICES": "2", "JAX_PLATFORMS": "cpu"}
    proc = _run(["-c", PARAMS_STORE_CHECK], env=env, timeout=120)
    assert proc.returncode == 0, _failed(proc)
    assert proc.stdout.strip().splitlines()[-1] == "ok"


def test_replay_throughput_measures_every_replay_and_kind(tmp_path):
    import replay_throughput

    out = str(tmp_path / "replay.json")
    args = ["--vector-capacity", "4096", "--atari-capacity", "1024", "--repeats", "2", "--out", out]
    assert replay_throughput.main([*args, "--allow-dirty"]) == 0
    with open(out) as f:
        result = json.load(f)
    rows = result["rows"]
    _assert_provenance(result, None)
    assert [(r["kind"], r["prioritized"]) for r in rows] == [
        ("vector", False),
        ("vector", True),
        ("atari", False),
        ("atari", True),
    ]
    for r in rows:
        assert r["held_transitions"] == r["capacity_transitions"]  # full when timed
        assert r["inserts_per_s"] > 0 and r["samples_per_s"] > 0
