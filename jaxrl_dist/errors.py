"""Errors that end a run or refuse a command line; each message is one line that says why."""

import argparse


class RunError(RuntimeError):
    """A run cannot continue (an actor died, ...); the message says why."""


class NonFiniteError(RunError):
    """A non-finite loss or gradient: the state is not saved (the last checkpoint is kept)."""


def one_line(e: BaseException) -> str:
    """`e` as one line for a message: its type and the first line of its text."""
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


class UsageError(ValueError):
    """Bad command-line input; one line."""


class OneLineArgumentParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors raise UsageError with one line, as every other bad input
    of the scripts (not argparse's usage block and exit)."""

    def error(self, message: str):
        raise UsageError(f"{message} (see --help)")
