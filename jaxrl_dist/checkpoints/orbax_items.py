"""Orbax items and patches of our own: the packed state's plain-file item, the per-process
replay contents' files (each with its SHA-256 beside it, `digest_path`), and TensorStore's
leaking metrics read turned off. Imported by `checkpoint.py`, which applies them."""

from __future__ import annotations

import dataclasses
import hashlib
import logging

import jax
import numpy as np
import orbax.checkpoint as ocp

DIGEST_PREFIX = "sha256."  # `sha256.bytes` beside `bytes`: the hex SHA-256 of its contents


def _quiet(record: logging.LogRecord) -> bool:
    """Orbax warns at every save without metrics once `best_fn` is set (most saves have none);
    and a save that fails to write (a full disk: an OSError) is logged with its traceback by
    each of Orbax's background threads before it is raised, which `Checkpointer` turns into one
    line (`CheckpointSaveError`). Other failures keep their tracebacks."""
    message = record.getMessage()
    failed_write = record.exc_info is not None and isinstance(record.exc_info[1], OSError)
    return not (failed_write or "did not provide metrics" in message)


logging.getLogger("absl").addFilter(_quiet)


def _skip_raw_write_throughput() -> None:
    """Orbax (0.12.x) reads TensorStore's kvstore metrics before and after every array save, only
    to log a raw write throughput, and `tensorstore.experimental_collect_matching_metrics`
    (0.1.86) leaks a Python list per matching metric on every call: ~15 of the ~25 KiB a 9-array
    state grew per save, 60 -> 37.5 MiB/h in `benchmarks/soak.py` (test_checkpoint.py). Orbax
    skips that log line when the byte count reads 0, so the count is made to read 0. Patched by
    attribute, so an Orbax that moves the function is left alone (the test then says so)."""
    try:
        from orbax.checkpoint._src.serialization import tensorstore_utils
    except ImportError:
        return
    if hasattr(tensorstore_utils, "get_tensorstore_raw_bytes"):
        tensorstore_utils.get_tensorstore_raw_bytes = lambda *args, **kwargs: 0


_skip_raw_write_throughput()


class BytesHandler(ocp.JsonCheckpointHandler):
    """One byte string as a plain file, written by the primary process (as Orbax's JSON items
    are): the packed state, without TensorStore, whose native memory grows by a few KiB with
    every array it writes (`packing.py`). Restores to a `uint8` NumPy array."""

    FILENAME = "bytes"

    def __init__(self):
        super().__init__(self.FILENAME)

    async def _save_fn(self, x: bytes, directory) -> None:
        if self._primary_host is None or jax.process_index() == self._primary_host:
            write_with_digest(directory / self.FILENAME, x)

    def restore(self, directory, item=None, args=None) -> np.ndarray:
        return np.frombuffer(read_checked(directory / self.FILENAME), np.uint8)


def digest_path(path):
    """Where the SHA-256 of the file `path` is kept (a name that does not start as its own)."""
    return path.with_name(DIGEST_PREFIX + path.name)


def write_with_digest(path, data: bytes) -> None:
    """`data` to `path`, and its SHA-256 (hex) to `digest_path(path)` (in Orbax's commit
    thread: the hashing costs the training loop nothing)."""
    path.write_bytes(data)
    digest_path(path).write_text(hashlib.sha256(data).hexdigest())


def read_checked(path) -> bytes:
    """The bytes of `path`; ValueError if the SHA-256 saved beside them differs (a flipped or
    cut file). Files saved before digests (none beside) are read as they are."""
    if not path.exists():
        raise FileNotFoundError(f"{path} not found")
    data = path.read_bytes()
    problem = digest_problem(path, data)
    if problem:
        raise ValueError(problem)
    return data


def digest_problem(path, data: bytes) -> str | None:
    """Why `data` (read from `path`) is not what was saved, by the digest beside it; None if
    it is, or if there is no digest (saved before digests)."""
    digest = digest_path(path)
    if not digest.exists():
        return None
    if hashlib.sha256(data).hexdigest() != digest.read_text().strip():
        return f"{path.parent.name}/{path.name} fails its SHA-256 checksum"
    return None


@ocp.args.register_with_handler(BytesHandler, for_save=True)
@dataclasses.dataclass
class BytesSave(ocp.args.CheckpointArgs):
    item: bytes


@ocp.args.register_with_handler(BytesHandler, for_restore=True)
@dataclasses.dataclass
class BytesRestore(ocp.args.CheckpointArgs):
    item: bytes | None = None


class ProcessBytesHandler(BytesHandler):
    """One byte string per process, each written by its own process as `bytes.<process
    index>` in the item's directory: a replay's contents, which every process holds a shard
    of. Restores this process's file to a `uint8` NumPy array."""

    def _own(self, directory):
        return directory / f"{self.FILENAME}.{jax.process_index()}"

    async def _save_fn(self, x: bytes, directory) -> None:
        write_with_digest(self._own(directory), x)

    def restore(self, directory, item=None, args=None) -> np.ndarray:
        return np.frombuffer(read_checked(self._own(directory)), np.uint8)


@ocp.args.register_with_handler(ProcessBytesHandler, for_save=True)
@dataclasses.dataclass
class ProcessBytesSave(ocp.args.CheckpointArgs):
    item: bytes


@ocp.args.register_with_handler(ProcessBytesHandler, for_restore=True)
@dataclasses.dataclass
class ProcessBytesRestore(ocp.args.CheckpointArgs):
    item: bytes | None = None
