"""`scripts/train.py` whose XLA actor loop hangs inside its first unroll (test_xla_actor.py): a
host callback that sleeps an hour stands in for a `recv` stuck inside XLA."""

import sys
import time

import jax
from jax.experimental import io_callback

import jaxrl_dist.acting.xla_actor as xla_actor
from jaxrl_dist.tools.train_cli import main

real_make_unroll = xla_actor.make_unroll


def hanging_make_unroll(*args, **kwargs):
    start, unroll = real_make_unroll(*args, **kwargs)

    def forever(handle):
        time.sleep(3600)
        return handle

    def stuck(params, handles, carry):
        first = handles[0]
        shape = jax.ShapeDtypeStruct(first.shape, first.dtype)
        return unroll(params, (io_callback(forever, shape, first), *handles[1:]), carry)

    return start, stuck


xla_actor.make_unroll = hanging_make_unroll

if __name__ == "__main__":
    sys.exit(main())
