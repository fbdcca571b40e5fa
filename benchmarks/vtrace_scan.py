"""CPU benchmark: reverse `lax.scan` vs `lax.associative_scan` V-trace on `[T, B]` blocks.

Times the jitted forward pass and a jitted forward+backward pass (`value_and_grad` of a loss
using all outputs, w.r.t. `v_tm1`) of `jaxrl_dist.ops.vtrace_td_error_and_advantage` for each
`method`, plus `rlax.vtrace_td_error_and_advantage` vmapped over `B` when rlax is installed.
Each timing is the median over repeats (methods interleaved within a repeat, after warm-up) of
the mean time per call within that repeat.

Usage:
    python benchmarks/vtrace_scan.py [--repeats 31] [--output PATH]
"""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import shlex  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from jaxrl_dist.ops import vtrace_td_error_and_advantage  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import provenance  # noqa: E402

SHAPES = [(20, 32), (128, 256), (20, 1024), (128, 1024)]
DEFAULT_OUTPUT = os.path.join(os.path.dirname(__file__), "results", "cpu", "vtrace_scan.json")


def _inputs(shape, seed=0):
    rng = np.random.default_rng(seed)
    v_tm1, v_t, r_t = (rng.normal(size=shape).astype(np.float32) for _ in range(3))
    discount_t = np.where(rng.uniform(size=shape) < 0.05, 0.0, 0.99).astype(np.float32)
    rho_tm1 = np.exp(rng.normal(scale=0.5, size=shape)).astype(np.float32)
    return tuple(jnp.asarray(x) for x in (v_tm1, v_t, r_t, discount_t, rho_tm1))


def _candidates():
    fns = {
        m: lambda *x, m=m: vtrace_td_error_and_advantage(*x, 0.95, method=m)
        for m in ("scan", "associative")
    }
    try:
        import rlax
    except ImportError:
        return fns
    rlax_fn = lambda *x: rlax.vtrace_td_error_and_advantage(*x, lambda_=0.95)
    fns["rlax_vmap"] = jax.vmap(rlax_fn, in_axes=1, out_axes=1)
    return fns


def _loss(fn, v_tm1, *rest):
    out = fn(v_tm1, *rest)
    return jnp.mean(out.errors**2) - jnp.mean(out.pg_advantage) + jnp.mean(out.q_estimate)


def _time_per_call(fn, args, number):
    start = time.perf_counter()
    for _ in range(number):
        out = fn(*args)
    jax.block_until_ready(out)
    return (time.perf_counter() - start) / number


def bench_shape(shape, fns, repeats):
    args = _inputs(shape)
    jitted = {}
    for name, fn in fns.items():
        jitted[f"{name}/forward"] = jax.jit(fn)
        jitted[f"{name}/forward_backward"] = jax.jit(
            jax.value_and_grad(lambda *x, f=fn: _loss(f, *x))
        )
    number = {}
    for key, fn in jitted.items():  # Warm-up (compile), then size `number` for ~20 ms repeats.
        jax.block_until_ready(fn(*args))
        once = _time_per_call(fn, args, 3)
        number[key] = max(1, int(0.02 / max(once, 1e-7)))
    samples = {key: [] for key in jitted}
    for _ in range(repeats):  # Interleave candidates so that machine noise hits them alike.
        for key, fn in jitted.items():
            samples[key].append(_time_per_call(fn, args, number[key]))
    result = {
        k: {"median_us": statistics.median(v) * 1e6, "min_us": min(v) * 1e6, "number": number[k]}
        for k, v in samples.items()
    }
    for pass_ in ("forward", "forward_backward"):
        ratio = result[f"associative/{pass_}"]["median_us"] / result[f"scan/{pass_}"]["median_us"]
        result[f"associative_over_scan/{pass_}"] = ratio
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=31)
    parser.add_argument("--output", default=DEFAULT_OUTPUT)
    provenance.add_argument(parser)
    args = parser.parse_args(argv)
    origin = provenance.capture(args.allow_dirty)
    fns = _candidates()
    report = {
        "command": shlex.join([sys.executable] + sys.argv),
        "jax_version": jax.__version__,
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "python": platform.python_version(),
        "rlax_version": getattr(sys.modules.get("rlax"), "__version__", None),
        "loadavg_before": os.getloadavg(),
        "repeats": args.repeats,
        "provenance": origin,
        "dtype": "float32",
        "lambda_": 0.95,
        "results": {},
    }
    for shape in SHAPES:
        key = "T={},B={}".format(*shape)
        report["results"][key] = bench_shape(shape, fns, args.repeats)
        res = report["results"][key]
        print(
            key,
            {
                k: round(v["median_us"], 1) if isinstance(v, dict) else round(v, 2)
                for k, v in res.items()
            },
            flush=True,
        )
    report["loadavg_after"] = os.getloadavg()
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
