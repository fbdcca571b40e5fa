"""Where one actor step's inference time goes, by env batch and by concurrent actor threads.

    python benchmarks/actor_step.py --config configs/impala_atari.py --batches 16,32,64

Times, per call and after warm-up, the pieces of the actor's inference: the observation's copy
to the device, the jitted act (forward pass and sampling, waited for), and the actions' copy
back; then the whole step from 1, 2 and 4 threads at once. Prints a table; writes JSON with
`--out`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time

import jax
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import provenance  # noqa: E402
import stages  # noqa: E402

from jaxrl_dist.acting.policy_client import jit_inference_step  # noqa: E402
from jaxrl_dist.agents.base import ActorCore, ActorIdentity  # noqa: E402
from jaxrl_dist.config.cli import parse_args  # noqa: E402

PIECE_CALLS = 50  # calls timed per piece (fewer where `--calls` asks for fewer)


def _median_us(fn, n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times) * 1e6)


def _median_us_fresh(make, n: int) -> float:
    """Median time of `device_get` on fresh outputs: a fetched array caches its host copy."""
    times = []
    for _ in range(n):
        out = make()
        jax.block_until_ready(out)
        t0 = time.perf_counter()
        jax.device_get(out)
        times.append(time.perf_counter() - t0)
    return float(np.median(times) * 1e6)


def inference(act_step, core: ActorCore, params, device, batch: int, seed: int):
    """`call(obs, rows) -> (action, env_action, extras)`: the actor's jitted inference step with
    a per-env actor state of its own (donated at each call, so one per thread)."""
    state = core.init_state(ActorIdentity(0, 1), batch, jax.random.PRNGKey(seed))
    box = {"state": jax.device_put(state, device)}

    def call(obs, rows):
        first = np.zeros(len(rows), bool)  # a memoryless policy: no resets to make
        *out, box["state"] = act_step(params, obs, rows, first, box["state"])
        return tuple(out[:3])

    return call


def measure(act_step, core: ActorCore, params, device, spec, batch: int, calls: int) -> dict:
    """One env batch: the inference pieces alone, then whole steps from 1, 2 and 4 threads."""
    obs = np.random.default_rng(0).integers(0, 255, (batch, *spec.obs_shape))
    obs = obs.astype(spec.obs_dtype)
    rows = np.arange(batch, dtype=np.int32)  # the env ids of one recv(), as the actor sends them
    call = inference(act_step, core, params, device, batch, seed=0)
    jax.block_until_ready(call(obs, rows))  # compile
    obs_dev, rows_dev = jax.device_put((obs, rows), device)
    step = lambda call=call: jax.device_get(call(obs, rows))  # noqa: E731
    n = min(PIECE_CALLS, calls)
    row = {
        "batch": batch,
        "put_obs_us": _median_us(lambda: jax.device_put(obs, device).block_until_ready(), n),
        "act_us": _median_us(lambda: jax.block_until_ready(call(obs_dev, rows_dev)), n),
        "get_actions_us": _median_us_fresh(lambda: call(obs_dev, rows_dev), n),
        "step_us": _median_us(step, n),
    }
    for threads in (1, 2, 4):
        per_thread = max(1, calls // threads)
        calls_by_thread = [
            inference(act_step, core, params, device, batch, seed=1 + i) for i in range(threads)
        ]

        def worker(i, n=per_thread, calls_by_thread=calls_by_thread):
            for _ in range(n):
                step(calls_by_thread[i])

        pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
        t0 = time.perf_counter()
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        elapsed = time.perf_counter() - t0
        row[f"env_sps_{threads}_threads"] = per_thread * threads * batch / elapsed
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="16,32,64")
    parser.add_argument(
        "--calls", type=int, default=200, help="whole steps per thread count (pieces: 50 each)"
    )
    parser.add_argument("--out", default=None)
    provenance.add_argument(parser)
    args, rest = parser.parse_known_args(argv)
    config, _ = parse_args([*rest, "--workdir", "unused"])
    origin = provenance.capture(args.allow_dirty, config)
    spec, devices, agent = stages.build(config)
    device = devices.actor_devices[0]
    learner_state = agent.learner.init(jax.random.PRNGKey(0))
    params = jax.device_put(agent.learner.actor_params(learner_state), device)
    act_step = jit_inference_step(agent.actor)
    rows = []
    for batch in [int(b) for b in args.batches.split(",")]:
        rows.append(measure(act_step, agent.actor, params, device, spec, batch, args.calls))
        print(json.dumps({k: round(v, 1) for k, v in rows[-1].items()}), flush=True)
    result = {"device": str(device.device_kind), "config": rest, "provenance": origin, "rows": rows}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
