"""Reads an offline W&B run's records (`run-ID.wandb`: a LevelDB-style log of protobuf
`Record`s after a 7-byte W&B header), for the tests: wandb 0.31 has no public reader."""

from __future__ import annotations

import glob
import json
import os
import struct

BLOCK = 32 * 1024
HEADER = 7  # b":W&B", a 2-byte magic, a version byte
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def _payloads(data: bytes):
    pos, parts = HEADER, []
    while pos + 7 <= len(data):
        room = BLOCK - pos % BLOCK
        if room < 7:  # a block's tail too short for a header is padding
            pos += room
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if kind == 0 and length == 0:
            pos += room
            continue
        chunk = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind == FULL:
            yield chunk
        elif kind == FIRST:
            parts = [chunk]
        elif kind == MIDDLE:
            parts.append(chunk)
        elif kind == LAST:
            yield b"".join([*parts, chunk])


def offline_records(workdir: str) -> dict:
    """{"run_ids": [...], "runs": [run records], "config": {key: value}, "history": [dicts],
    "summary": {key: value}, "files": [paths]} of every offline run in `workdir/wandb`."""
    from wandb.proto import wandb_internal_pb2 as pb

    out = {"run_ids": [], "runs": [], "config": {}, "history": [], "summary": {}, "files": []}
    for path in sorted(glob.glob(os.path.join(workdir, "wandb", "offline-run-*", "run-*.wandb"))):
        with open(path, "rb") as f:
            data = f.read()
        for payload in _payloads(data):
            record = pb.Record()
            record.ParseFromString(payload)
            kind = record.WhichOneof("record_type")
            if kind == "run":
                out["run_ids"].append(record.run.run_id)
                out["runs"].append(record.run)
                for item in record.run.config.update:
                    out["config"][item.key] = json.loads(item.value_json)
            elif kind == "config":
                for item in record.config.update:
                    out["config"][item.key] = json.loads(item.value_json)
            elif kind == "history":
                row = {}
                for item in record.history.item:
                    key = item.key or "/".join(item.nested_key)
                    row[key] = json.loads(item.value_json)
                out["history"].append(row)
            elif kind == "summary":
                for item in record.summary.update:
                    key = item.key or "/".join(item.nested_key)
                    out["summary"][key] = json.loads(item.value_json)
            elif kind == "files":
                out["files"] += [file.path for file in record.files.files]
    return out
