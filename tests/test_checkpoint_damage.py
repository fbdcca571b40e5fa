"""Damaged checkpoints (issue 55, item 6): a latest step cut short, with a byte flipped, an item
deleted or emptied, or half-written by a kill or a full disk during its save. `--resume` and
`RUN@latest` name the damaged step in one line and go on from the newest intact one (exactly:
deterministic mode ends with the params of a run never interrupted); a full disk stops the run
in one line and deletes no older step; runs killed at random times resume exactly.

One tiny deterministic run (6 updates, a checkpoint every 2) is shared; each case damages a
copy of it."""

import errno
import glob
import json
import os
import random
import shutil
import signal
import subprocess
import sys

import jax
import pytest

from jaxrl_dist.checkpoints import orbax_items
from jaxrl_dist.checkpoints.integrity import newest_intact
from jaxrl_dist.checkpoints.policy import load_policy
from jaxrl_dist.checkpoints.store import restore_params, tree_digest
from jaxrl_dist.config.cli import parse_args
from jaxrl_dist.run.preflight import warm_params
from jaxrl_dist.run.resume import check_resumable
from jaxrl_dist.run.trainer import Trainer
from jaxrl_dist.tools import evaluate_cli
from jaxrl_dist.tools.train_cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "scripts", "train.py")
KILL = os.path.join(ROOT, "tests", "kill_at_random.py")
CARTPOLE = os.path.join(ROOT, "configs", "impala_cartpole.py")
# Deterministic mode: two actors of 8 sync envs, one unroll each an update, new envs every 3
# updates (a resume replays recorded actions): 6 updates of 320 env steps.
RUN = [
    "--config",
    f"{CARTPOLE}:quick",
    "--quiet",
    "--config.deterministic=true",
    "--config.sebulba.async_envs=false",
    "--config.sebulba.envs_per_actor=8",
    "--config.batch_size=16",
    "--config.sebulba.num_actor_threads=2",
    "--config.total_env_steps=1920",
    "--config.eval_episodes=1",
    "--config.checkpoint_every_updates=2",
    "--config.sebulba.env_epoch_updates=3",
]


def _summary(workdir) -> dict:
    with open(os.path.join(workdir, "summary.json")) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    """The shared run, never interrupted: its work dir (checkpoints 2, 4, 6) and summary."""
    workdir = tmp_path_factory.mktemp("damage") / "whole"
    config, _ = parse_args([*RUN, "--workdir", str(workdir)])
    Trainer(config, str(workdir), quiet=True).run()
    return workdir, _summary(workdir)


def _copy(whole, tmp_path):
    workdir = tmp_path / "run"
    shutil.copytree(whole[0], workdir)
    return workdir, workdir / "checkpoints"


def _flip(path, at=None):
    data = bytearray(path.read_bytes())
    data[len(data) // 2 if at is None else at] ^= 0x01
    path.write_bytes(bytes(data))


def _replace(path, old, new):
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def _tensorstore_chunks(step_dir):
    return [p for p in glob.glob(f"{step_dir}/replay/**/d/*", recursive=True)]


# what is done to checkpoint 6 -> (the kind of damage found, words of its detail)
DAMAGE = {
    "a flipped byte": (lambda c: _flip(c / "6/packed/bytes"), "checksum", "packed/bytes fails"),
    "a file cut short": (
        lambda c: (c / "6/packed/bytes").write_bytes((c / "6/packed/bytes").read_bytes()[:999]),
        "truncated",
        "999 bytes",
    ),
    "an item deleted": (lambda c: shutil.rmtree(c / "6/meta"), "missing", "item meta"),
    "an item emptied": (lambda c: (c / "6/packed/bytes").write_bytes(b""), "truncated", "0 b"),
    "unparsable JSON": (lambda c: (c / "6/layout/metadata").write_text('[{"pa'), "unreadable", ""),
    "a number changed": (
        lambda c: _replace(c / "6/meta/metadata", '"updates": 6', '"updates": 7'),
        "checksum",
        "meta fails",
    ),
    "no commit marker": (lambda c: os.remove(c / "6/commit_success.txt"), "uncommitted", ""),
    "its digest deleted": (
        lambda c: os.remove(c / "6/packed/sha256.bytes"),
        "missing",
        "sha256.bytes",
    ),
}


@pytest.mark.parametrize("how", list(DAMAGE))
def test_a_damaged_latest_step_is_found_before_it_is_used(whole, tmp_path, how):
    """Each kind of damage to the latest step: readers (`RUN@latest`) and `--resume` both take
    step 4 and name step 6's damage."""
    damage, kind, words = DAMAGE[how]
    _, ckpts = _copy(whole, tmp_path)
    damage(ckpts)
    step, damaged = newest_intact(str(ckpts))
    assert step == 4 and [(d.step, d.kind) for d in damaged] == [(6, kind)], damaged
    assert words in damaged[0].detail
    plan = check_resumable(str(ckpts), None)
    assert (plan.step, [d.kind for d in plan.damaged]) == (4, [kind])


def test_damage_to_older_steps_and_saves_cut_short(whole, tmp_path):
    """A half-written save (Orbax's temporary directory, as a kill leaves it) counts for
    --resume only (beside a live run it is a save in progress); TensorStore's own checksums find
    a flipped byte in the recorded actions, which only --resume reads; a step saved before
    digests (none kept) reads as it was written."""
    _, ckpts = _copy(whole, tmp_path)
    os.rename(ckpts / "6", ckpts / "6.orbax-checkpoint-tmp")
    assert newest_intact(str(ckpts)) == (4, [])
    plan = check_resumable(str(ckpts), None)
    assert plan.step == 4 and [(d.step, d.kind) for d in plan.damaged] == [(6, "half-written")]
    chunks = _tensorstore_chunks(ckpts / "4")
    assert chunks
    for chunk in chunks:
        _flip(type(ckpts)(chunk))
    assert newest_intact(str(ckpts))[0] == 4  # readers of params never read the replay
    plan = check_resumable(str(ckpts), None)
    assert plan.step == 2 and [(d.step, d.kind) for d in plan.damaged] == [
        (6, "half-written"),
        (4, "unreadable"),
    ]
    assert "DATA_LOSS" in plan.damaged[1].detail
    shutil.rmtree(ckpts / "2" / "integrity")
    os.remove(ckpts / "2" / "packed" / "sha256.bytes")
    assert check_resumable(str(ckpts), None).step == 2


def test_resume_passes_over_a_damaged_step_and_ends_exact(whole, tmp_path, capsys):
    """--resume with a flipped byte in the latest step: one warning line, the step moved aside
    (nothing deleted), the fallback in the log and the summary, and the run ends with the
    uninterrupted run's params."""
    workdir, ckpts = _copy(whole, tmp_path)
    _flip(ckpts / "6" / "packed" / "bytes")
    flipped = (ckpts / "6" / "packed" / "bytes").read_bytes()
    assert main([*RUN, "--workdir", str(workdir), "--resume"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    moved = ckpts / "damaged" / "6-checksum"
    assert err == [
        "warning: --resume: checkpoint step 6 (packed/bytes fails its SHA-256 checksum) is "
        f"damaged; resuming from step 4, the newest intact one; moved aside to {moved}"
    ]
    assert (moved / "packed" / "bytes").read_bytes() == flipped  # kept as it was
    summary = _summary(workdir)
    assert summary["resumed_from_update"] == 4 and summary["updates"] == 6
    assert summary["checkpoint_fallback"] == {
        "resumed_step": 4,
        "damaged": [
            {"step": 6, "kind": "checksum", "detail": "packed/bytes fails its SHA-256 checksum"}
        ],
        "moved_to": [str(moved)],
    }
    assert summary["params_sha256"] == whole[1]["params_sha256"]
    assert sorted(n for n in os.listdir(ckpts) if n.isdigit()) == ["2", "4", "6"]  # a new 6
    with open(workdir / "metrics.jsonl") as f:
        logged = [r for r in map(json.loads, f) if "checkpoint/resumed_step" in r]
    assert [(r["checkpoint/resumed_step"], r["checkpoint/damaged_steps"]) for r in logged] == [
        (4, 1)
    ]


def _snapshot(workdir):
    return {
        os.path.join(d, f): os.stat(os.path.join(d, f)).st_mtime_ns
        for d, _, files in os.walk(workdir)
        for f in files
    }


def test_no_intact_step_is_refused_in_one_line_and_nothing_changes(whole, tmp_path, capsys):
    workdir, ckpts = _copy(whole, tmp_path)
    for step in (2, 4, 6):
        _flip(ckpts / str(step) / "packed" / "bytes")
    before = _snapshot(workdir)
    assert main([*RUN, "--workdir", str(workdir), "--resume"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: --resume: no intact checkpoint in {ckpts}")
    assert "step 6 (packed/bytes fails its SHA-256 checksum)" in err[0]
    assert "start anew in another --workdir" in err[0]
    assert _snapshot(workdir) == before


def test_run_at_latest_reads_the_newest_intact_step_with_a_note(whole, tmp_path, capsys):
    """`load_policy(RUN)`, `scripts/evaluate.py RUN` and a warm start from `RUN@latest` take
    step 4 when step 6 is cut short, each with one line naming step 6."""
    workdir, ckpts = _copy(whole, tmp_path)
    (ckpts / "6" / "packed" / "bytes").write_bytes(b"")
    note = (
        "checkpoint step 6 (packed/bytes: 0 bytes, its layout says {}) is damaged; using step "
        "4, the newest intact one"
    )
    assert load_policy(str(workdir)).step == 4
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"warning: {workdir}@latest: checkpoint step 6")
    line = err[0].removeprefix(f"warning: {workdir}@latest: ")
    size = line.split("layout says ")[1].split(")")[0]
    assert line == note.format(size)

    out = tmp_path / "eval.json"
    assert evaluate_cli.main([str(workdir), "--episodes", "1", "--json", str(out)]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"warning: {workdir}@latest: {note.format(size)}"]
    record = json.loads(out.read_text())
    assert record["step"] == 4 and record["checkpoint_note"] == f"{workdir}@latest: {line}"

    notes = []
    params = restore_params(str(workdir), step=4)
    like = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), params)
    _, step, warm = warm_params(f"{workdir}@latest", like, "CartPole-v1", warn=notes.append)
    assert step == 4 and tree_digest(warm) == tree_digest(params)
    assert notes == [f"config.warm_start: {workdir}@latest: {line}"]
    assert capsys.readouterr().err.strip() == f"warning: {notes[0]}"

    # Beside a live run, a save in progress (its temporary directory) is no damage.
    os.makedirs(ckpts / "8.orbax-checkpoint-tmp")
    shutil.rmtree(ckpts / "6")
    assert load_policy(str(workdir)).step == 4
    assert capsys.readouterr().err == ""


def test_a_full_disk_during_a_save_stops_the_run_and_deletes_nothing_older(
    whole, tmp_path, capsys, monkeypatch
):
    """ENOSPC injected where the packed state is written (in Orbax's background commit, as a
    full disk fails it; a real full disk, a 500 KiB tmpfs, is beyond a test without root): the
    save of step 4 fails, the run stops in one line at the next save, steps 2 and 3 are kept
    although `keep_checkpoints=2` would have deleted 2 once 4 was complete, and `--resume`
    goes on from step 3 to the uninterrupted run's params."""
    workdir = tmp_path / "run"
    args = [
        *RUN,
        "--workdir",
        str(workdir),
        "--config.checkpoint_every_updates=1",
        "--config.keep_checkpoints=2",
    ]
    real_write = orbax_items.write_with_digest

    def full_disk(path, data):
        if f"{os.sep}4.orbax-checkpoint-tmp{os.sep}" in str(path):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        real_write(path, data)

    monkeypatch.setattr(orbax_items, "write_with_digest", full_disk)
    assert main(args) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(
        "error: checkpoint step 4 could not be saved (OSError: [Errno 28] No space left on device"
    )
    assert "deleted no older step (newest complete step 3 in" in err[0]
    ckpts = workdir / "checkpoints"
    assert sorted(os.listdir(ckpts)) == ["2", "3", "4.orbax-checkpoint-tmp", "best"]
    summary = _summary(workdir)
    assert summary["stop_reason"].startswith("error: checkpoint step 4 could not be saved")
    assert summary["updates"] == 5  # stopped at the next save, which found the failure

    monkeypatch.setattr(orbax_items, "write_with_digest", real_write)
    assert main([*args, "--resume"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "step 4 (a save cut short) is damaged; resuming from step 3" in err[0]
    summary = _summary(workdir)
    assert summary["resumed_from_update"] == 3
    assert summary["params_sha256"] == whole[1]["params_sha256"]
    assert os.listdir(ckpts / "damaged") == ["4-half-written"]


def test_runs_killed_at_random_times_resume_exactly(whole, tmp_path):
    """SIGKILL at random points (inside a save's background write or between updates) and in
    the middle of writing a save, a checkpoint every update; each resume goes on from the
    newest intact step, or is refused in one line; the last ends with the uninterrupted run's
    params."""
    seed = random.randrange(2**31)
    workdir = tmp_path / "run"
    base = [*RUN, "--workdir", str(workdir), "--config.checkpoint_every_updates=1"]

    def run(*prefix, resume=True):
        command = [sys.executable, *prefix, *base, *(["--resume"] if resume else [])]
        return subprocess.run(command, capture_output=True, text=True, timeout=300)

    kills = [(KILL, str(seed), "random"), (KILL, str(seed + 1), "in-save")]
    for n, prefix in enumerate(kills):
        out = run(*prefix, resume=n > 0)
        assert out.returncode == -signal.SIGKILL, f"seed {seed}: {out.stderr[-2000:]}"
    out = run(TRAIN)
    lines = out.stderr.strip().splitlines()
    if out.returncode == 2:  # refused: one line, which says why
        assert len(lines) == 1 and lines[0].startswith("error: --resume:"), (seed, lines)
        return
    assert out.returncode == 0, f"seed {seed}: {out.stderr[-3000:]}"
    assert all(line.startswith("warning: --resume: checkpoint") for line in lines), (seed, lines)
    summary = _summary(workdir)
    assert summary["params_sha256"] == whole[1]["params_sha256"], seed
