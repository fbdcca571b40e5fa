"""`scripts/train.py`: the command line above the library. It parses the flags and checks the
config (`config/cli.py`, cheap: no JAX backend started), then starts the run's processes and
hands the config to the run shell (`run/trainer.py`). Config errors and bad flags print one
line and exit with status 2 before anything is written.
"""

from __future__ import annotations

import sys
import traceback

from jaxrl_dist.compilation import use_compilation_cache
from jaxrl_dist.config import ConfigError, TrainConfig
from jaxrl_dist.config.cli import (
    EXIT_CONFIG_ERROR,
    EXIT_INTERRUPTED,
    command_line_message,
    launch_spec,
    parse_args,
)
from jaxrl_dist.config.describe import help_text
from jaxrl_dist.determinism import set_deterministic_xla_flags
from jaxrl_dist.learning import distributed


def make_trainer(config: TrainConfig, workdir: str, **kwargs: object):
    """The run's `Trainer` (on the engine `config.runtime` names); imported on first use, after
    the cheap checks."""
    from jaxrl_dist.run.trainer import Trainer

    return Trainer(config, workdir, **kwargs)


def main(argv: list[str] | None = None) -> int:
    """`scripts/train.py`'s exit status for the flags `argv` (`sys.argv[1:]` by default)."""
    from jaxrl_dist.run.trainer import RunError  # heavy imports after the cheap checks

    argv = sys.argv[1:] if argv is None else argv
    try:
        config, args = parse_args(argv)
    except ConfigError as e:
        print(f"error: {command_line_message(e)}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    if args.help_config:
        print(help_text(config))
        return 0
    if config.deterministic:  # before anything starts JAX's backends
        set_deterministic_xla_flags()
    use_compilation_cache()  # before the first compile (jax.distributed's may be one)
    launch = launch_spec(args)
    try:
        distributed.initialize(launch)
    except (RuntimeError, ValueError) as e:  # coordinator unreachable, a timeout, ...
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"error: jax.distributed.initialize failed: {first}", file=sys.stderr)
        return 1
    try:
        trainer = make_trainer(config, args.workdir, resume=args.resume, quiet=args.quiet)
        trainer.run()
    except ConfigError as e:
        print(f"error: {command_line_message(e)}", file=sys.stderr)
        return EXIT_CONFIG_ERROR  # every process found the same problem: all leave together
    except RunError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except distributed.ProcessLostError as e:
        print(f"error: {e}", file=sys.stderr)
        distributed.exit_now(1)  # skip jax.distributed.shutdown's barrier: a process is gone
    except KeyboardInterrupt:  # a second Ctrl-C (the first asks for a clean stop), or one
        # before the trainer's handlers are in place
        print(
            "error: interrupted: left at once, without a final checkpoint (the last one saved "
            "is kept; continue with --resume)",
            file=sys.stderr,
        )
        if launch.enabled:
            distributed.exit_now(EXIT_INTERRUPTED)  # the others wait in a collective: go now
        return EXIT_INTERRUPTED
    except BaseException:
        if not launch.enabled:
            raise
        # A bug or a second Ctrl-C in one process: the others wait in a collective for it, and
        # jax.distributed.shutdown would wait for them, so leave now; they notice at once.
        traceback.print_exc()
        distributed.exit_now(1)
    return 0
