"""`python tests/kill_at_random.py SEED MODE [train.py args]`: runs the training CLI and kills
this process with SIGKILL, as a power cut or the OOM killer would, at a point drawn from SEED.

MODE `random`: from the start of a save drawn among the 2nd to 4th (one complete save at least
lies behind it), after a delay drawn in [0, 40] ms: inside that save's background write, or in
the updates after it. MODE `in-save`: in the middle of writing the packed state of the 2nd save
(half its bytes on disk), so Orbax's temporary directory is certainly left behind."""

import os
import random
import signal
import sys
import threading

from jaxrl_dist.checkpoints import orbax_items
from jaxrl_dist.checkpoints.store import Checkpointer
from jaxrl_dist.tools import train_cli


def _kill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def kill_after_a_save(rng: random.Random) -> None:
    real_save, saves = Checkpointer.save, [0]
    at, delay = rng.randint(2, 4), rng.uniform(0.0, 0.04)

    def save(self, *args, **kwargs):
        saves[0] += 1
        if saves[0] == at and "best" not in os.path.basename(self.directory):
            threading.Timer(delay, _kill).start()
        return real_save(self, *args, **kwargs)

    Checkpointer.save = save


def kill_mid_write() -> None:
    real_write, writes = orbax_items.write_with_digest, [0]

    def write(path, data: bytes) -> None:
        if "/best/" not in str(path) and path.name == orbax_items.BytesHandler.FILENAME:
            writes[0] += 1
            if writes[0] == 2:
                path.write_bytes(data[: len(data) // 2])
                _kill()
        real_write(path, data)

    orbax_items.write_with_digest = write


def main() -> int:
    seed, mode, argv = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    if mode == "random":
        kill_after_a_save(random.Random(seed))
    elif mode == "in-save":
        kill_mid_write()
    else:
        raise SystemExit(f"MODE {mode!r}: give random or in-save")
    return train_cli.main(argv)


if __name__ == "__main__":
    sys.exit(main())
