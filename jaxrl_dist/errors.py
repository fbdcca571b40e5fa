"""Errors that end a run; each message is one line that says why."""


class RunError(RuntimeError):
    """A run cannot continue (an actor died, ...); the message says why."""


class NonFiniteError(RunError):
    """A non-finite loss or gradient: the state is not saved (the last checkpoint is kept)."""
