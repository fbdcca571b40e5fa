"""Every check that needs 4 fake CPU devices, in one process (JAX fixes its device count when
it starts, so they cannot run in the suite's workers; one process starts JAX once for all):
the learner update (`sharded_update_check.py`), the Anakin program
(`anakin_devices_check.py`) and a sharded checkpoint (`checkpoint_sharded_check.py`), each on
4 devices against 1. Prints one JSON line, a verdict per check."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import anakin_devices_check  # noqa: E402
import checkpoint_sharded_check  # noqa: E402
import sharded_update_check  # noqa: E402

if __name__ == "__main__":
    verdicts = {
        "sharded_update": sharded_update_check.verdict(),
        "anakin": anakin_devices_check.verdict(),
        "checkpoint": checkpoint_sharded_check.verdict(),
    }
    print(json.dumps(verdicts))
