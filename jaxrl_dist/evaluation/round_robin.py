"""The one round-robin of several agents of a run in a turn-based game (`config.agents`), for
every kind of player: each agent against the run's evaluation opponent, then each pair against
each other. The players are the env kind's (`pools.GameEvaluator` on EnvPool or Python pools,
`jax_envs.JaxEvaluator` in JAX); this module only decides who plays whom and how the results
are named."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from jaxrl_dist.evaluation.base import EvalResult, Evaluator


class PairEvaluator(Protocol):
    """One pair's games: agent a (`params`) against agent b (`other`, b's params, playing the
    mode of its policy), from a's side; None when `abort()` turned true first."""

    def run(
        self,
        params: Any,
        other: Any,
        greedy: bool,
        abort: Callable[[], bool],
        at_update: int,
    ) -> EvalResult | None: ...

    def close(self) -> None: ...


class RoundRobin:
    """Several agents in a turn-based game. `run(params: {name: params}, ...)`'s returns are
    `[episodes, agents]` (each agent's against the opponent, in `config.agents` order: what
    `reward_metric` sees); its statistics are each agent's as `NAME/<stat>`, each pair's as
    `A_vs_B/<stat>` (A's side), and `return_worst_seat`, the weakest agent's weaker seat. An
    `Evaluator`."""

    def __init__(self, alone: dict[str, Evaluator], pairs: dict[tuple[str, str], PairEvaluator]):
        """`alone`: each agent's games against the opponent, in `config.agents` order; `pairs`:
        `(a, b)`'s games for each pair, a before b in that order."""
        names = list(alone)
        order = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
        if set(pairs) != set(order):
            raise ValueError(f"a round-robin of {names} plays the pairs {order}")
        self._alone, self._pairs = alone, {pair: pairs[pair] for pair in order}

    def run(
        self,
        params: dict[str, Any],
        greedy: bool = True,
        abort: Callable[[], bool] = lambda: False,
        at_update: int = 0,
    ) -> EvalResult | None:
        returns, lengths, extra = [], [], {}
        for name, evaluator in self._alone.items():
            result = evaluator.run(params[name], greedy, abort, at_update)
            if result is None:
                return None
            returns.append(result.returns[:, 0])
            lengths.append(result.lengths)
            extra.update({f"{name}/{k}": v for k, v in result.stats().items()})
        # The weakest agent's weaker seat: every agent reaches a target on this one.
        extra["return_worst_seat"] = min(extra[f"{name}/return_worst_seat"] for name in self._alone)
        for (a, b), evaluator in self._pairs.items():
            result = evaluator.run(params[a], params[b], greedy, abort, at_update)
            if result is None:
                return None
            extra.update({f"{a}_vs_{b}/{k}": v for k, v in result.stats().items()})
        return EvalResult(np.stack(returns, axis=1), np.mean(lengths, axis=0), extra)

    def close(self) -> None:
        for evaluator in [*self._alone.values(), *self._pairs.values()]:
            evaluator.close()
