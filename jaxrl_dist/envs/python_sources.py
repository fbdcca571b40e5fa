"""The Python env sources: `gymnasium:ID` (or gymnasium's own `gymnasium:module:ID`: the module
is imported first, so a user's package registers its env), `pettingzoo:module:factory`, and a
factory registered by `register_env_factory(name, fn)` (`Trainer(config, workdir,
env_factory=...)` does it), named `factory:NAME`. Each makes one env per call, stepped in worker
processes (`process_pool.py`) behind EnvPool's async protocol; `env_kwargs["max_episode_steps"]`
wraps a factory's env in gymnasium's TimeLimit. `EnvSource`s the registry holds
(`envs/registry.py`).
"""

from __future__ import annotations

import difflib
import functools
import importlib
import os
from collections.abc import Callable
from typing import Any

from jaxrl_dist.envs.envpool_env import EnvSpec
from jaxrl_dist.envs.observation import (
    ObservationSubset,
    obs_indices_problem,
    split_obs_indices,
)
from jaxrl_dist.envs.probe import PROBED
from jaxrl_dist.envs.process_pool import ProcessPool, layout_fits
from jaxrl_dist.envs.source import POOL, EnvSource, PoolOptions
from jaxrl_dist.envs.steppers import call_factory, gymnasium_make
from jaxrl_dist.errors import one_line
from jaxrl_dist.user_code import FactoryError, import_problem, load_factory

GYMNASIUM = "gymnasium:"
PETTINGZOO = "pettingzoo:"
FACTORY = "factory:"
PYTHON_SOURCES = (GYMNASIUM, PETTINGZOO, FACTORY)

_FACTORIES: dict[str, Callable[..., Any]] = {}


def register_env_factory(name: str, factory: Callable[..., Any]) -> str:
    """Makes `factory(**env_kwargs)` (one gymnasium `Env` per call) the env `factory:NAME`;
    returns that id. For envs that cannot be imported by name; the workers receive the factory
    pickled with cloudpickle, so a lambda or a class defined in a notebook works."""
    if not callable(factory):
        raise TypeError(f"env_factory={factory!r} is not callable; pass a function making one env")
    _FACTORIES[name] = factory
    _python_check.cache_clear()  # a name given to another factory: check it afresh
    PROBED.clear()
    return FACTORY + name


def is_python_env(env_id: str) -> bool:
    """Whether `env_id` names a Python env stepped in worker processes (the shipped Python
    sources: their worker layout and affinity options apply)."""
    return env_id.startswith(PYTHON_SOURCES)


def python_factory(env_id: str, env_kwargs: dict[str, Any]) -> Callable[[], Any]:
    """A picklable function making one env of `env_id` (a Python source)."""
    if env_id.startswith(GYMNASIUM):
        import gymnasium

        # The registration as this process sees it (its module imported here): a worker needs
        # no registry of its own, so an env registered in the user's script works too.
        module, _, gym_id = env_id[len(GYMNASIUM) :].rpartition(":")
        if module:  # gymnasium's module:ID form: the module registers the env on import
            importlib.import_module(module)
        spec = gymnasium.spec(gym_id)
        return functools.partial(gymnasium_make, spec, dict(env_kwargs))
    if env_id.startswith(PETTINGZOO):
        return functools.partial(call_factory, load_factory(env_id, PETTINGZOO), dict(env_kwargs))
    name = env_id[len(FACTORY) :]
    if name not in _FACTORIES:
        raise KeyError(name)
    return functools.partial(call_factory, _FACTORIES[name], dict(env_kwargs))


def _build(env_id: str, env_kwargs: dict[str, Any]) -> tuple[Any, str | None]:
    """One env of a Python source, or the one-line reason it cannot be made."""
    name = f"config.env_id={env_id!r}"
    if env_id.startswith(FACTORY) and env_id[len(FACTORY) :] not in _FACTORIES:
        return None, (
            f"{name} names no registered factory; pass env_factory= to Trainer (or call "
            "register_env_factory) in the process that runs it"
        )
    try:
        env = python_factory(env_id, env_kwargs)()
    except FactoryError as e:
        return None, str(e)
    except ModuleNotFoundError as e:
        return None, import_problem(name, e, _named_module(env_id) or e.name or "")
    except Exception as e:  # noqa: BLE001  the user's code: any error is reported in one line
        return None, _gymnasium_problem(env_id, env_kwargs, e) or (
            f"{name}: making the env failed with {one_line(e)}"
        )
    return env, None


def _named_module(env_id: str) -> str | None:
    """The module `env_id` makes its envs from (the one the user must make importable), if
    known: its `module:` part, a gymnasium entry point's module, a factory's module."""
    if env_id.startswith(FACTORY):
        return getattr(_FACTORIES.get(env_id[len(FACTORY) :]), "__module__", None)
    module, _, gym_id = env_id.split(":", 1)[1].rpartition(":")
    if module or not env_id.startswith(GYMNASIUM):
        return module or None
    import gymnasium

    try:
        entry = gymnasium.spec(gym_id).entry_point
    except Exception:  # noqa: BLE001  an unknown id: reported by its own check
        return None
    return entry.partition(":")[0] if isinstance(entry, str) else entry.__module__


def _gymnasium_problem(env_id: str, env_kwargs: dict[str, Any], e: BaseException) -> str | None:
    import gymnasium

    if not env_id.startswith(GYMNASIUM):
        return None
    gym_id = env_id[len(GYMNASIUM) :]
    if isinstance(e, gymnasium.error.NameNotFound | gymnasium.error.NamespaceNotFound):
        ids = list(gymnasium.registry)
        close = difflib.get_close_matches(gym_id.split(":")[-1], ids, n=3, cutoff=0.5)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        return (
            f"config.env_id={env_id!r} is not a registered gymnasium env{hint}; register it, "
            "or name its module: gymnasium:my_pkg.envs:MyEnv-v0"
        )
    if isinstance(e, TypeError) and "must inherit from the gymnasium.Env" in str(e):
        return (
            f"config.env_id={env_id!r} does not make a gymnasium.Env ({one_line(e)[:120]}); "
            "make its entry point return one gymnasium.Env (the workers step copies of it)"
        )
    if isinstance(e, TypeError):
        return (
            f"config.env_kwargs={env_kwargs!r} rejected by gymnasium.make for {gym_id}: "
            f"{one_line(e)}"
        )
    return None


def _env_problem(env_id: str, env: Any) -> str | None:
    import gymnasium

    name = f"config.env_id={env_id!r}"
    if isinstance(env, gymnasium.vector.VectorEnv):
        return (
            f"{name} makes a VectorEnv; make it return one gymnasium.Env (jaxrl_dist steps "
            "copies of it in worker processes)"
        )
    if not isinstance(env, gymnasium.Env):
        return f"{name} made a {type(env).__name__}, not a gymnasium.Env; return a gymnasium.Env"
    inner = env
    while isinstance(inner, gymnasium.Wrapper):
        if isinstance(inner, gymnasium.wrappers.Autoreset):
            return (
                f"{name} is wrapped in gymnasium's Autoreset; drop the wrapper (the workers "
                "reset each env on the step after its episode ends, as EnvPool does)"
            )
        inner = inner.env
    return None


def _spaces_of(env: Any) -> tuple:
    """What must agree between two envs of a run: the spaces (every agent's for PettingZoo)."""
    if hasattr(env, "possible_agents"):
        agents = list(env.possible_agents)
        return (agents, [(env.observation_space(a), env.action_space(a)) for a in agents])
    return (env.observation_space, env.action_space)


def _spec_problem(env_id: str, env: Any) -> tuple[EnvSpec | None, str | None]:
    from jaxrl_dist.envs.spaces import SpaceAdapter, spaces_problem

    if env_id.startswith(PETTINGZOO):
        from jaxrl_dist.envs.pettingzoo_env import pettingzoo_problem, pettingzoo_spec

        problem = pettingzoo_problem(env)
        return (None, problem) if problem else (pettingzoo_spec(env), None)
    problem = _env_problem(env_id, env) or spaces_problem(env.observation_space, env.action_space)
    if problem:
        return None, problem
    return SpaceAdapter(env.observation_space, env.action_space).spec(), None


@functools.lru_cache(maxsize=64)
def _python_check(env_id: str, kwargs_repr: str, env_kwargs: Any) -> tuple[Any, str | None]:
    """(the env's `EnvSpec`, None) or (None, a one-line problem): two envs are built, their
    spaces checked and compared."""
    kwargs = dict(env_kwargs)
    envs = []
    try:
        for _ in range(2):
            env, problem = _build(env_id, kwargs)
            if problem:
                return None, problem
            envs.append(env)
        spec, problem = _spec_problem(env_id, envs[0])
        if problem:
            prefix = "" if problem.startswith("config.") else f"config.env_id={env_id!r}: "
            return None, prefix + problem
        first, second = (_spaces_of(env) for env in envs)
        if first != second:
            return None, (
                f"config.env_id={env_id!r}: its spaces change between instances ({first} then "
                f"{second}); every env a run makes must have the same spaces"
            )
        return spec, None
    finally:
        for env in envs:
            try:
                env.close()
            except Exception:  # noqa: BLE001, S110  closing a probe env: nothing to report
                pass


def _python(env_id: str, env_kwargs: dict[str, Any]) -> tuple[Any, str | None]:
    kwargs, _ = split_obs_indices(env_kwargs)
    frozen = tuple(sorted(kwargs.items(), key=lambda kv: kv[0]))
    try:
        return _python_check(env_id, repr(frozen), frozen)
    except TypeError:  # unhashable kwargs values: no cache
        return _python_check.__wrapped__(env_id, repr(frozen), frozen)


def _probe_python(env_id: str, env_kwargs: dict[str, Any], start_timeout_s: float) -> Any:
    """A Python source's pool for the probe: one quiet worker, whose first step is part of its
    start too."""
    kwargs, _ = split_obs_indices(env_kwargs)
    factory = python_factory(env_id, kwargs)
    timeouts = {"step_timeout_s": start_timeout_s, "start_timeout_s": start_timeout_s}
    return ProcessPool(factory, env_id, 1, 1, 1, seed=0, quiet=True, **timeouts)


def _python_spec(env_id: str, env_kwargs: dict[str, Any]) -> EnvSpec:
    spec, problem = _python(env_id, env_kwargs)
    if problem:
        raise ValueError(problem)
    _, indices = split_obs_indices(env_kwargs)
    return spec if indices is None else spec._replace(obs_shape=(len(indices),))


def _python_problem(env_id: str, env_kwargs: dict[str, Any]) -> str | None:
    spec, problem = _python(env_id, env_kwargs)
    _, indices = split_obs_indices(env_kwargs)
    return problem or obs_indices_problem(indices, spec.obs_shape)


def worker_layout_problem(num_envs: int, batch_size: int, workers: int) -> str | None:
    """Why `workers` worker processes (0: `default_workers`) cannot hold an actor's envs, or
    None: each worker holds the same number of envs, and a `recv()` batch is whole workers."""
    if not workers or layout_fits(num_envs, batch_size, workers):
        return None
    fits = [w for w in range(1, num_envs + 1) if layout_fits(num_envs, batch_size, w)]
    return (
        f"config.sebulba.env_threads_per_actor={workers} worker processes cannot hold {num_envs} "
        "envs "
        f"with recv() batches of {batch_size} (each worker the same envs, a batch whole "
        f"workers); use 0 (automatic) or one of {fits}"
    )


def default_workers(num_envs: int, batch_size: int, cpus: int | None = None) -> int:
    """Python envs' worker processes: as many as cores (at most one per env) such that every
    worker holds the same number of envs and a recv batch is whole workers."""
    cpus = cpus or len(os.sched_getaffinity(0))
    for workers in range(min(cpus, num_envs), 0, -1):
        if layout_fits(num_envs, batch_size, workers):
            return workers
    return num_envs  # unreachable for batch_size | num_envs: one env per worker always fits


def _make_python(
    env_id: str, env_kwargs: dict[str, Any], num_envs: int, batch_size: int, options: PoolOptions
) -> Any:
    kwargs, indices = split_obs_indices(env_kwargs)
    pool = ProcessPool(
        python_factory(env_id, kwargs),
        env_id,
        num_envs,
        batch_size,
        options.num_threads or default_workers(num_envs, batch_size),
        seed=options.seed,
        restart=options.restart,
        step_timeout_s=options.step_timeout_s,
        start_timeout_s=options.start_timeout_s,
    )
    return pool if indices is None else ObservationSubset(pool, indices)


PYTHON_ENV_SOURCES = tuple(
    EnvSource(
        name,
        POOL,
        (prefix,),
        check=_python_problem,
        make=_make_python,
        spec=_python_spec,
        noun="a Python env",
        probe=_probe_python,
    )
    for name, prefix in (("gymnasium", GYMNASIUM), ("pettingzoo", PETTINGZOO), ("factory", FACTORY))
)
