"""`python tests/signal_at_update.py SIGNAL N [train.py args]`: runs the training CLI and sends
this process SIGNAL (a real one, through the trainer's own handler, or SIGKILL) right after
its N-th update, so fault tests interrupt a run at a known point instead of a timed guess.

With `HOLD_SAVE=PATH` in the environment, every checkpoint save first touches PATH and then
waits 120 s, so a test can signal a run that is certainly in the middle of its shutdown."""

import os
import pathlib
import signal
import sys
import time

from jaxrl_dist.learning.learner import Learner
from jaxrl_dist.run.trainer import Trainer
from jaxrl_dist.tools import train_cli


def main() -> int:
    name, at, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    real_update, done = Learner.update, [0]

    def update(self, state, batch):
        out = real_update(self, state, batch)
        done[0] += 1
        if done[0] == at:
            os.kill(os.getpid(), getattr(signal, name))
        return out

    Learner.update = update
    if hold := os.environ.get("HOLD_SAVE"):

        def held_save(self, run, params_update=None):
            pathlib.Path(hold).touch()
            time.sleep(120)

        Trainer._save = held_save
    return train_cli.main(argv)


if __name__ == "__main__":
    sys.exit(main())
