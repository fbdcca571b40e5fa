"""Env failures injected into real runs (imported by test_reliability.py and
test_rainbow_faults.py)."""

import jaxrl_dist.acting.fleet as fleet_module


class FailingEnv:
    """An EnvPool whose `recv` raises after `fail_after` calls (None: never)."""

    def __init__(self, env, fail_after):
        self._env, self._fail_after, self._calls = env, fail_after, 0

    def recv(self):
        self._calls += 1
        if self._fail_after is not None and self._calls > self._fail_after:
            raise RuntimeError("injected env failure")
        return self._env.recv()

    def __getattr__(self, name):
        return getattr(self._env, name)


def inject_env_failures(monkeypatch, fail_after_by_env):
    """The n-th EnvPool the actors make fails after `fail_after_by_env(n)` recv() calls."""
    real_make_env, made = fleet_module.make_env, []

    def make_env(*args, **kwargs):
        made.append(None)
        return FailingEnv(real_make_env(*args, **kwargs), fail_after_by_env(len(made) - 1))

    monkeypatch.setattr(fleet_module, "make_env", make_env)
    return made
